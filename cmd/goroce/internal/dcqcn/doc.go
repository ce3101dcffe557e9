// Package dcqcn is `goroce dcqcn` (Run): the DCQCN experiments of package
// bench/experiment (incast, converge) on goroce devices behind a simulated
// switch, in virtual time, with a CSV, a PNG and a summary line.
package dcqcn
