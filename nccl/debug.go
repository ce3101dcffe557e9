package nccl

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Version is the library version printed by NCCL_DEBUG=VERSION.
const Version = "goroce-nccl 0.1"

// debugLevel is the zap level of an NCCL_DEBUG value (Options.Debug):
// VERSION, WARN, INFO or TRACE, in any case; off for "".
func debugLevel(s string) (lvl zapcore.Level, on bool, err error) {
	switch strings.ToUpper(strings.TrimSpace(s)) {
	case "":
		return 0, false, nil
	case "VERSION", "WARN":
		return zap.WarnLevel, true, nil
	case "INFO":
		return zap.InfoLevel, true, nil
	case "TRACE":
		return zap.DebugLevel, true, nil
	}
	return 0, false, errors.New("want VERSION, WARN, INFO or TRACE")
}

// newLogger builds the logger NCCL users expect from Options.Debug (the
// level, NCCL_DEBUG; "" is silent) and Options.DebugFile (NCCL_DEBUG_FILE:
// a file name in which %h becomes the host name and %p the process id;
// "" is standard error).
func newLogger(level, file string) (*zap.Logger, error) {
	lvl, on, err := debugLevel(level)
	if err != nil {
		return nil, fmt.Errorf("%w: NCCL_DEBUG=%q: %v", ErrInvalidArgument, level, err)
	}
	if !on {
		return zap.NewNop(), nil
	}
	out := os.Stderr
	if file != "" {
		host, _ := os.Hostname()
		name := strings.NewReplacer("%h", host, "%p", strconv.Itoa(os.Getpid())).Replace(file)
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
	if strings.EqualFold(strings.TrimSpace(level), "VERSION") || lvl <= zap.InfoLevel {
		l.Warn("NCCL version " + Version)
	}
	return l, nil
}
