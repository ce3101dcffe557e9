package reduce

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// DataType is the element type of a collective's buffers, numbered as
// ncclDataType_t.
type DataType uint8

// Element types. Values are those of NCCL's ncclDataType_t.
const (
	Int8     DataType = 0 // ncclInt8
	Uint8    DataType = 1 // ncclUint8
	Int32    DataType = 2 // ncclInt32
	Uint32   DataType = 3 // ncclUint32
	Int64    DataType = 4 // ncclInt64
	Uint64   DataType = 5 // ncclUint64
	Float16  DataType = 6 // ncclFloat16: IEEE 754 binary16
	Float32  DataType = 7 // ncclFloat32
	Float64  DataType = 8 // ncclFloat64
	BFloat16 DataType = 9 // ncclBfloat16: the top half of a float32
)

var dataTypeNames = [...]string{"int8", "uint8", "int32", "uint32", "int64", "uint64",
	"float16", "float32", "float64", "bfloat16"}

var dataTypeSizes = [...]int{1, 1, 4, 4, 8, 8, 2, 4, 8, 2}

// DataTypes lists every supported element type, for tests and tools.
var DataTypes = []DataType{Int8, Uint8, Int32, Uint32, Int64, Uint64, Float16, Float32, Float64, BFloat16}

// String returns the type's name as NCCL spells it (float32, bfloat16, ...).
func (t DataType) String() string {
	if t.Valid() {
		return dataTypeNames[t]
	}
	return fmt.Sprintf("DataType(%d)", uint8(t))
}

// Valid reports whether t is one of the supported element types.
func (t DataType) Valid() bool { return int(t) < len(dataTypeNames) }

// Size returns the size of one element in bytes, or 0 for an invalid type.
func (t DataType) Size() int {
	if t.Valid() {
		return dataTypeSizes[t]
	}
	return 0
}

// IsFloat reports whether t is a floating-point type.
func (t DataType) IsFloat() bool {
	return t == Float16 || t == Float32 || t == Float64 || t == BFloat16
}

// Op is a reduction operator, numbered as ncclRedOp_t.
type Op uint8

// Reduction operators. Avg is Sum followed by a division by the number of
// ranks (Divide), applied once to the fully reduced value.
const (
	Sum  Op = 0 // ncclSum
	Prod Op = 1 // ncclProd
	Max  Op = 2 // ncclMax
	Min  Op = 3 // ncclMin
	Avg  Op = 4 // ncclAvg
)

var opNames = [...]string{"sum", "prod", "max", "min", "avg"}

// Ops lists every supported operator, for tests and tools.
var Ops = []Op{Sum, Prod, Max, Min, Avg}

// String returns the op's name (sum, prod, max, min, avg).
func (o Op) String() string {
	if o.Valid() {
		return opNames[o]
	}
	return fmt.Sprintf("Op(%d)", uint8(o))
}

// Valid reports whether o is one of the supported operators.
func (o Op) Valid() bool { return int(o) < len(opNames) }

// Errors returned for misuse. Wrapped errors say what was wrong.
var (
	ErrDataType = errors.New("reduce: invalid data type")
	ErrOp       = errors.New("reduce: invalid reduction op")
	ErrLength   = errors.New("reduce: buffer lengths differ or are not a whole number of elements")
)

// PutInt stores v as one element of type t, little-endian, at the start of
// b (at least t.Size() bytes): integers wrap to their width, floats round
// to nearest even. Tests and tools use it to fill buffers with values every
// type represents the same way.
func PutInt(b []byte, t DataType, v int64) {
	le := binary.LittleEndian
	switch t {
	case Int8, Uint8:
		b[0] = byte(v)
	case Int32, Uint32:
		le.PutUint32(b, uint32(v))
	case Int64, Uint64:
		le.PutUint64(b, uint64(v))
	case Float16:
		le.PutUint16(b, Float64ToFloat16(float64(v)))
	case BFloat16:
		le.PutUint16(b, Float64ToBFloat16(float64(v)))
	case Float32:
		le.PutUint32(b, math.Float32bits(float32(v)))
	case Float64:
		le.PutUint64(b, math.Float64bits(float64(v)))
	}
}
