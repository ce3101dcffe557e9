package udplink

import (
	"testing"
)

// Datagrams of 4096 bytes (a 12-byte header, 4080 bytes of payload, a
// 4-byte ICRC-sized tail), in batches of 64, over loopback. The bytes per
// operation are one batch, so MB/s is goodput.
const (
	benchDatagram = 4096
	benchBatch    = 64
)

// BenchmarkRoundTrip alternates one WriteBatch and the ReadBatch calls
// that receive it, in one goroutine: the cost of the system calls alone.
func BenchmarkRoundTrip(b *testing.B) {
	for _, tc := range []struct{ name, ip1, ip2 string }{
		{"IPv4", "127.88.20.1", "127.88.20.2"},
		{"IPv6", "::1", "::1"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			tx, rx := openLink(b, tc.ip1, batched), openLink(b, tc.ip2, batched)
			send, recv := gatheredBatch(benchBatch, benchDatagram-16, rx.LocalAddr()), recvPackets(benchBatch, benchDatagram)
			b.SetBytes(benchBatch * benchDatagram)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := tx.WriteBatch(send); err != nil {
					b.Fatal(err)
				}
				for got := 0; got < benchBatch; {
					n, err := rx.ReadBatch(recv)
					if err != nil {
						b.Fatal(err)
					}
					got += n
				}
			}
			b.ReportMetric(float64(b.N*benchBatch)/b.Elapsed().Seconds()/1e6, "Mpps")
		})
	}
}

// BenchmarkPipelined sends from one goroutine and receives in another, as
// the device does. The sender stays at most window batches ahead of the
// receiver, well inside the socket buffer, so nothing is lost and the
// benchmark never waits for a datagram that will not come.
func BenchmarkPipelined(b *testing.B) {
	const window = 16 // batches in flight: 4 MiB
	tx, rx := openLink(b, "127.88.21.1", batched), openLink(b, "127.88.21.2", batched)
	send, recv := gatheredBatch(benchBatch, benchDatagram-16, rx.LocalAddr()), recvPackets(benchBatch, benchDatagram)
	b.SetBytes(benchBatch * benchDatagram)
	b.ReportAllocs()
	b.ResetTimer()

	credits := make(chan struct{}, window)
	for range window {
		credits <- struct{}{}
	}
	sendErr := make(chan error, 1)
	go func() {
		for range b.N {
			<-credits
			if _, err := tx.WriteBatch(send); err != nil {
				sendErr <- err
				return
			}
		}
		sendErr <- nil
	}()
	for got := 0; got < b.N*benchBatch; {
		n, err := rx.ReadBatch(recv)
		if err != nil {
			b.Fatal(err)
		}
		for range (got+n)/benchBatch - got/benchBatch { // batches completed
			credits <- struct{}{}
		}
		got += n
	}
	if err := <-sendErr; err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N*benchBatch)/b.Elapsed().Seconds()/1e6, "Mpps")
}
