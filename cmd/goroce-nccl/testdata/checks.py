"""The tally the Python test programs keep and the Go tests read."""


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
