package mesh

import (
	"sync"
	"time"
)

// logEvery lets one log record through per period (failureLogEvery when
// zero) and counts the ones it holds back, for the next record to report:
// a peer that sends garbage many times a second must not flood the log.
type logEvery struct {
	period time.Duration

	mu         sync.Mutex
	last       time.Time
	suppressed int
}

// allow reports whether a record may be logged at now, and how many were
// held back since the last one.
func (l *logEvery) allow(now time.Time) (ok bool, suppressed int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	period := l.period
	if period == 0 {
		period = failureLogEvery
	}
	if !l.last.IsZero() && now.Sub(l.last) < period {
		l.suppressed++
		return false, 0
	}
	suppressed, l.suppressed, l.last = l.suppressed, 0, now
	return true, suppressed
}
