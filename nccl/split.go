package nccl

import (
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"reflect"
	"slices"

	"go.uber.org/zap"
)

// SplitNoColor is the color of a rank that takes part in CommSplit but
// joins no new communicator (NCCL_SPLIT_NOCOLOR).
const SplitNoColor = -1

// CommSplit is ncclCommSplit: every rank of c calls it, in the same order
// as its other operations, and the ranks that pass the same color form a
// new communicator, ranked by key (ties broken by their rank in c). A rank
// with color SplitNoColor gets a nil Comm and no error.
//
// The new communicator inherits what opts leaves unset from c: Timeout,
// the algorithm settings, the logger, the settings OptionsFromEnv reads
// and, unless opts.Device is set, c's RNIC, which then carries both
// communicators' QPs (CommInitRank opens a new one for a c made by
// NewComm, which has none). opts.GPU places the new communicator's FIFOs
// as CommInitRank does.
func (c *Comm) CommSplit(ctx context.Context, color, key int, opts Options) (*Comm, error) {
	if color < SplitNoColor {
		return nil, fmt.Errorf("%w: CommSplit: color %d (want ≥ 0, or SplitNoColor)", ErrInvalidArgument, color)
	}
	members, err := c.splitMembers(ctx, color, key)
	if err != nil {
		return nil, err
	}
	if color == SplitNoColor {
		// Still take part in the ID exchange the others wait for.
		_, err := c.splitID(ctx, false)
		return nil, err
	}
	rank := slices.Index(members, c.rank)
	leader := members[0]
	ids, err := c.splitID(ctx, rank == 0)
	if err != nil {
		return nil, err
	}
	id, ok := ids[leader]
	if !ok {
		return nil, fmt.Errorf("nccl: CommSplit: rank %d, the new communicator's first, could not make a unique ID", leader)
	}
	c.inherit(&opts)
	return CommInitRank(ctx, len(members), id, rank, opts)
}

// splitMembers gathers every rank's color and key and returns the ranks of
// c that share this rank's color, in their new order.
func (c *Comm) splitMembers(ctx context.Context, color, key int) ([]int, error) {
	const entry = 16
	send := make([]byte, entry)
	binary.LittleEndian.PutUint64(send, uint64(int64(color)))
	binary.LittleEndian.PutUint64(send[8:], uint64(int64(key)))
	all := make([]byte, entry*c.size)
	if err := c.AllGather(send, all, entry, Uint8).Wait(ctx); err != nil {
		return nil, fmt.Errorf("nccl: CommSplit: exchanging colors: %w", err)
	}
	type member struct{ rank, key int }
	var ms []member
	for r := range c.size {
		e := all[r*entry:]
		if int(int64(binary.LittleEndian.Uint64(e))) == color {
			ms = append(ms, member{r, int(int64(binary.LittleEndian.Uint64(e[8:])))})
		}
	}
	slices.SortFunc(ms, func(a, b member) int { return cmp.Or(cmp.Compare(a.key, b.key), cmp.Compare(a.rank, b.rank)) })
	ranks := make([]int, len(ms))
	for i, m := range ms {
		ranks[i] = m.rank
	}
	return ranks, nil
}

// splitID has every new communicator's first rank make a unique ID and
// gathers them: the result maps each leader's rank in c to its ID.
func (c *Comm) splitID(ctx context.Context, leader bool) (map[int]UniqueID, error) {
	const entry = 1 + UniqueIDBytes
	send := make([]byte, entry)
	if leader {
		if id, err := GetUniqueID(c.opts); err == nil {
			send[0] = 1
			copy(send[1:], id[:])
		} else {
			c.log.Warn("CommSplit: GetUniqueID failed", zap.Error(err))
		}
	}
	all := make([]byte, entry*c.size)
	if err := c.AllGather(send, all, entry, Uint8).Wait(ctx); err != nil {
		return nil, fmt.Errorf("nccl: CommSplit: exchanging unique IDs: %w", err)
	}
	ids := map[int]UniqueID{}
	for r := range c.size {
		if e := all[r*entry:]; e[0] == 1 {
			ids[r] = UniqueID(e[1:entry])
		}
	}
	return ids, nil
}

// inherit fills what opts leaves unset from c's options.
func (c *Comm) inherit(opts *Options) {
	if opts.Timeout <= 0 {
		opts.Timeout = c.opts.Timeout
	}
	if opts.Algo == AlgoAuto {
		opts.Algo = c.opts.Algo
	}
	if opts.DoublingThreshold <= 0 {
		opts.DoublingThreshold = c.opts.DoublingThreshold
	}
	if opts.SliceBytes <= 0 {
		opts.SliceBytes = c.opts.SliceBytes
	}
	if opts.Logger == nil {
		opts.Logger = c.opts.Logger
	}
	if opts.Device == nil {
		opts.Device = c.dev
	}
	inheritSettings(opts, c.opts)
}

// inheritSettings fills the settings OptionsFromEnv reads that opts
// leaves unset from parent's, so that a split communicator runs as its
// parent was told to.
func inheritSettings(opts *Options, parent Options) {
	opts.Debug = cmp.Or(opts.Debug, parent.Debug)
	opts.DebugFile = cmp.Or(opts.DebugFile, parent.DebugFile)
	opts.GDRLevel = cmp.Or(opts.GDRLevel, parent.GDRLevel)
	opts.Addr = cmp.Or(opts.Addr, parent.Addr)
	opts.CommID = cmp.Or(opts.CommID, parent.CommID)
	opts.Pcap = cmp.Or(opts.Pcap, parent.Pcap)
	opts.BusyPoll = cmp.Or(opts.BusyPoll, parent.BusyPoll)
	opts.IBTimeout = cmp.Or(opts.IBTimeout, parent.IBTimeout)
	opts.IBRetryCnt = cmp.Or(opts.IBRetryCnt, parent.IBRetryCnt)
	if opts.Launch.Launcher == "" && opts.Launch.LocalSize == 0 {
		opts.Launch = parent.Launch
	}
	if reflect.ValueOf(opts.RNIC).IsZero() {
		opts.RNIC = parent.RNIC
	}
}
