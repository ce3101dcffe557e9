package rnic

import (
	"errors"
	"net/netip"
	"reflect"
	"testing"

	"github.com/goroce/goroce/rnic/simlink"
)

// TestDescribe checks that a Description answers every query as the device
// opened with the same Config does while open, on IPv4 and IPv6, with the
// default MTU and another, with peer memory; and that Describe refuses
// what Open refuses.
func TestDescribe(t *testing.T) {
	network := simlink.NewNetwork(simlink.Config{})
	t.Cleanup(func() { network.Close() })
	for _, cfg := range []Config{
		{Addr: netip.MustParseAddrPort("10.0.0.1:4791")},
		{Addr: netip.MustParseAddrPort("[fd00::7]:4791"), MTU: 1024},
		{Addr: netip.MustParseAddrPort("10.0.0.3:4791"), MTU: 2048, PeerMemory: true},
	} {
		port, err := network.Attach(cfg.Addr, simlink.PortConfig{})
		if err != nil {
			t.Fatal(err)
		}
		opened := cfg
		opened.Link = port
		d, err := Open(opened)
		if err != nil {
			t.Fatal(err)
		}
		s, err := Describe(cfg)
		if err != nil {
			t.Fatalf("Describe(%+v): %v", cfg, err)
		}
		if got, want := s.QueryDevice(), d.QueryDevice(); got != want {
			t.Errorf("%v: QueryDevice of the description %+v, of the device %+v", cfg.Addr, got, want)
		}
		for _, p := range []uint8{0, 1, 2} {
			got, gotErr := s.QueryPort(p)
			want, wantErr := d.QueryPort(p)
			if got != want || (gotErr == nil) != (wantErr == nil) {
				t.Errorf("%v: QueryPort(%d) of the description %+v, %v; of the device %+v, %v", cfg.Addr, p, got, gotErr, want, wantErr)
			}
		}
		for _, i := range []int{-1, 0, 1, 1023, 1024} {
			got, gotErr := s.QueryGID(1, i)
			want, wantErr := d.QueryGID(1, i)
			if got != want || !reflect.DeepEqual(errors.Unwrap(gotErr), errors.Unwrap(wantErr)) {
				t.Errorf("%v: QueryGID(1, %d) of the description %v, %v; of the device %v, %v", cfg.Addr, i, got, gotErr, want, wantErr)
			}
		}
		d.Close()
	}
	for _, cfg := range []Config{{}, {Addr: netip.MustParseAddrPort("10.0.0.9:4791"), MTU: 1500}} {
		if _, err := Describe(cfg); !errors.Is(err, ErrInvalidArg) {
			t.Errorf("Describe(%+v) error %v, want ErrInvalidArg as Open gives", cfg, err)
		}
	}
}
