//go:build race

package qp

// checkToken makes the engine entry points check that the QP's token is
// held: on in race-enabled builds, where the tests that hammer one QP from
// every side run.
const checkToken = true
