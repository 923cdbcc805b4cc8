package rollback

import (
	"time"

	"github.com/google/uuid"

	"pisess/writers/durable"
	"pisess/writers/wire"
)

// DefaultLockTimeout is how long a rollback waits for a session or store
// lock that pi (or another process) holds before it reports the session as
// busy, as migrate's --lock-timeout defaults.
const DefaultLockTimeout = 30 * time.Second

// Options configure ByCorrelation, ToCheckpoint and FinishPending.
type Options struct {
	// DryRun plans and reports without locking or changing anything.
	DryRun bool
	// LockTimeout bounds the wait for a session lock or store mutation
	// lock; 0 means DefaultLockTimeout.
	LockTimeout time.Duration
	// Ops performs every file operation; the zero value is durable.OS.
	Ops durable.Ops
	// Clock stamps events and notes; nil means time.Now.
	Clock func() time.Time
	// CorrelationID is ToCheckpoint's run id, written into the intent and
	// the rollback event; "" generates one. ByCorrelation takes its id as an
	// argument and ignores this.
	CorrelationID string
	// MigrationID is ToCheckpoint's migrationId (a UUID); "" generates one.
	// ByCorrelation stamps its journal events with it too.
	MigrationID string
	// Hold, when set, records the run as the holder of the tree lock the
	// caller holds; ByCorrelation calls it before its first write.
	Hold func() error
}

func (o Options) now() string {
	if o.Clock != nil {
		return wire.FormatTimestamp(o.Clock())
	}
	return wire.FormatTimestamp(time.Now())
}

func (o Options) lockTimeout() time.Duration {
	if o.LockTimeout > 0 {
		return o.LockTimeout
	}
	return DefaultLockTimeout
}

func (o Options) migrationID() string {
	if o.MigrationID != "" {
		return o.MigrationID
	}
	return uuid.NewString()
}
