package cpucoll

import (
	"errors"
	"slices"
	"testing"
)

func TestSelect(t *testing.T) {
	for _, tc := range []struct {
		list string
		want []string
	}{
		{"", []string{"goroce", "goroce-shm", "openmpi-tcp", "openmpi-shm", "gloo-ring", "gloo-ring-chunked", "gloo-halving-doubling"}},
		{"goroce-shm,goroce", []string{"goroce", "goroce-shm"}}, // goroce is a library's name: UDP alone
		{"gloo", []string{"gloo-ring", "gloo-ring-chunked", "gloo-halving-doubling"}},
		{"openmpi-shm, goroce", []string{"goroce", "openmpi-shm"}}, // Libraries' order, not the list's
		{"goroce,goroce", []string{"goroce"}},
		{"openmpi,gloo-ring", []string{"openmpi-tcp", "openmpi-shm", "gloo-ring"}},
	} {
		libs, err := Select(tc.list)
		if err != nil {
			t.Fatalf("Select(%q): %v", tc.list, err)
		}
		var got []string
		for _, l := range libs {
			got = append(got, l.Name)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("Select(%q) = %v, want %v", tc.list, got, tc.want)
		}
	}
	for _, bad := range []string{"nccl", "gloo,", "openmpi-ucx"} {
		if _, err := Select(bad); !errors.Is(err, ErrUnknownLibrary) {
			t.Errorf("Select(%q) = %v, want ErrUnknownLibrary", bad, err)
		}
	}
}

func TestFamilies(t *testing.T) {
	libs, _ := Select("gloo-ring,openmpi-shm,gloo-halving-doubling,openmpi-tcp")
	if got, want := Families(libs), []Family{OpenMPI, Gloo}; !slices.Equal(got, want) {
		t.Errorf("Families = %v, want %v", got, want)
	}
}
