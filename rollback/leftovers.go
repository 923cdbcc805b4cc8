package rollback

import (
	"sync"

	"github.com/rs/zerolog"

	"pisess/writers/durable"
)

// Leftovers are staging directories of a run's own that its sessions
// could not remove (EMFILE, EIO while the run held many descriptors): the
// run tries again once every session has ended (Retry), and what is left
// then the next run's heal quarantines (StagingPath names it after a
// migration the journal planned).
type Leftovers struct {
	Ops   durable.Ops
	mu    sync.Mutex
	paths []string
}

// RemoveStaging removes a staging directory of pisess's own by descriptor
// (a parent swapped for a symlink is never followed); one that cannot be
// removed now is kept for l's Retry (l nil: for the next run's heal).
func RemoveStaging(ops durable.Ops, l *Leftovers, path string, log zerolog.Logger) {
	err := ops.RemoveAll(path)
	if err == nil {
		return
	}
	log.Debug().Err(err).Str("staging", path).Msg("staging directory not removed: tried again at the end of the run")
	if l != nil {
		l.mu.Lock()
		l.paths = append(l.paths, path)
		l.mu.Unlock()
	}
}

// Retry removes the directories left; what still cannot be removed is
// logged and left for the next run's heal.
func (l *Leftovers) Retry(log zerolog.Logger) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, p := range l.paths {
		if err := l.Ops.RemoveAll(p); err != nil {
			log.Warn().Err(err).Str("staging", p).Msg("staging directory left: the next run's heal quarantines it")
		}
	}
	l.paths = nil
}
