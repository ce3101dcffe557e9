//go:build !race

package qp

// checkToken is off outside race-enabled builds (see token_race.go).
const checkToken = false
