package rnic

import (
	"sort"

	"github.com/goroce/goroce/dcqcn"
	"github.com/goroce/goroce/qp"
)

// QPResource is one QP as `rdma res show qp` shows it, plus its DCQCN rate.
type QPResource struct {
	qp.Status
	// Rate is the QP's DCQCN rate (its reaction point's current rate);
	// the line rate for a QP without DCQCN.
	Rate dcqcn.Rate
	// DCQCN reports whether the QP runs DCQCN: false for UD QPs and on a
	// device opened with DCQCN disabled.
	DCQCN bool
}

// Resources returns the device's QPs, by QPN.
func (d *Device) Resources() []QPResource {
	view := *d.view.Load()
	out := make([]QPResource, 0, len(view))
	for _, q := range view {
		out = append(out, QPResource{Status: q.Status(), Rate: q.Rate(), DCQCN: q.cc != nil})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].QPN < out[j].QPN })
	return out
}
