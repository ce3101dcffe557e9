package dcqcn

import "errors"

// Sentinel errors. Every error this package returns matches one of them with
// errors.Is.
var (
	// ErrInvalidParams means a Params value (or a line rate given with it)
	// is out of range. The error is a *ParamError naming the field.
	ErrInvalidParams = errors.New("dcqcn: invalid parameters")

	// ErrUnknownPreset means PresetByName was given a name Presets does
	// not list.
	ErrUnknownPreset = errors.New("dcqcn: unknown preset")

	// ErrInvalidRate means a Pacer was given a rate that is not a finite
	// number between 1 b/s and 10 Tb/s.
	ErrInvalidRate = errors.New("dcqcn: invalid rate")

	// ErrInvalidBurst means a Pacer was given a burst outside
	// 1 byte ... 256 MiB.
	ErrInvalidBurst = errors.New("dcqcn: invalid burst")
)

// ParamError says which parameter is wrong and why. It matches
// ErrInvalidParams with errors.Is.
type ParamError struct {
	Field  string // field name, as in Params ("RPGTimeReset"), or "lineRate"
	Reason string // what is wrong, with the offending value
}

// Error says which field is wrong and why.
func (e *ParamError) Error() string {
	return "dcqcn: invalid parameters: " + e.Field + ": " + e.Reason
}

// Is makes errors.Is(err, ErrInvalidParams) true for every *ParamError.
func (e *ParamError) Is(target error) bool { return target == ErrInvalidParams }
