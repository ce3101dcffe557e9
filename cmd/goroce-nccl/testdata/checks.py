"""What the Python test programs share: the tally the Go tests read, and
the RNIC address of a rank under torchrun."""

import os


def place_rank():
    """Under torchrun, which sets no per-rank RNIC address, puts this rank's
    at GOROCE_TEST_ADDR_BASE + LOCAL_RANK (the test picks the base); call
    it before the library loads, which reads GOROCE_ADDR then."""
    base = os.environ.get("GOROCE_TEST_ADDR_BASE")
    if base and "GOROCE_ADDR" not in os.environ:
        net, last = base.rsplit(".", 1)
        os.environ["GOROCE_ADDR"] = "%s.%d" % (net, int(last) + int(os.environ["LOCAL_RANK"]))


class Checks:
    """Counts checks and failures of one rank; each failure is printed as
    it happens, the summary ("rank R: N checks, F failed") by summary()."""

    def __init__(self, rank):
        self.rank, self.checks, self.failed = rank, 0, 0

    def __call__(self, ok, what):
        self.checks += 1
        if not ok:
            self.failed += 1
            print("rank %d: FAIL %s" % (self.rank, what), flush=True)

    def summary(self):
        print("rank %d: %d checks, %d failed" % (self.rank, self.checks, self.failed), flush=True)
