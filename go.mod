module github.com/goroce/goroce

go 1.26.0

require (
	github.com/gopacket/gopacket v1.7.7 // indirect
	github.com/klauspost/crc32 v1.3.0 // indirect
	go.uber.org/multierr v1.10.0 // indirect
	go.uber.org/zap v1.28.0 // indirect
	golang.org/x/net v0.62.0 // indirect
	golang.org/x/sys v0.50.0 // indirect
)
