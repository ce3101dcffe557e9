package nccl

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Version is the library version printed by NCCL_DEBUG=VERSION.
const Version = "goroce-nccl 0.1"

var getenv = os.Getenv

// LoggerFromEnv builds the logger NCCL users expect from NCCL_DEBUG
// (VERSION, WARN, INFO or TRACE; unset: silent) and NCCL_DEBUG_FILE (a file
// name in which %h is replaced by the host name and %p by the process id;
// unset: standard error).
func LoggerFromEnv() (*zap.Logger, error) {
	level := strings.ToUpper(strings.TrimSpace(getenv("NCCL_DEBUG")))
	var lvl zapcore.Level
	switch level {
	case "":
		return zap.NewNop(), nil
	case "VERSION", "WARN":
		lvl = zap.WarnLevel
	case "INFO":
		lvl = zap.InfoLevel
	case "TRACE":
		lvl = zap.DebugLevel
	default:
		return nil, fmt.Errorf("%w: NCCL_DEBUG=%q (want VERSION, WARN, INFO or TRACE)", ErrInvalidArgument, level)
	}
	out := os.Stderr
	if name := getenv("NCCL_DEBUG_FILE"); name != "" {
		host, _ := os.Hostname()
		name = strings.NewReplacer("%h", host, "%p", strconv.Itoa(os.Getpid())).Replace(name)
		f, err := os.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return nil, fmt.Errorf("nccl: NCCL_DEBUG_FILE: %w", err)
		}
		out = f
	}
	enc := zap.NewDevelopmentEncoderConfig()
	enc.NameKey = "logger"
	core := zapcore.NewCore(zapcore.NewConsoleEncoder(enc), zapcore.Lock(out), lvl)
	l := zap.New(core).Named("NCCL")
	if level == "VERSION" || lvl <= zap.InfoLevel {
		l.Warn("NCCL version " + Version)
	}
	return l, nil
}
