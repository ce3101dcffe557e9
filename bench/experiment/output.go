package experiment

import (
	"fmt"
	"os"
	"path/filepath"
)

// FileStem names a run's output files: "incast-n16-paper" or
// "incast-n16-off".
func FileStem(sc *Scenario) string {
	mode := sc.Preset
	if sc.DisableDCQCN {
		mode = "off"
	}
	return fmt.Sprintf("%s-n%d-%s", sc.Name, sc.Flows, mode)
}

// WriteFiles writes the run's CSV and PNG into dir (created if need be) and
// returns their paths.
func WriteFiles(dir string, r *Result) (csvPath, pngPath string, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", err
	}
	stem := filepath.Join(dir, FileStem(&r.Scenario))
	write := func(path string, fill func(*os.File) error) error {
		f, err := os.Create(path)
		if err != nil {
			return err
		}
		if err := fill(f); err != nil {
			f.Close()
			return fmt.Errorf("%s: %w", path, err)
		}
		return f.Close()
	}
	csvPath, pngPath = stem+".csv", stem+".png"
	if err := write(csvPath, func(f *os.File) error { return WriteCSV(f, r) }); err != nil {
		return "", "", err
	}
	if err := write(pngPath, func(f *os.File) error { return WritePNG(f, r) }); err != nil {
		return "", "", err
	}
	return csvPath, pngPath, nil
}
