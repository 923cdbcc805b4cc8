package commands

import (
	"io"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// Progress reports how far a long step has come. It is only ever drawn on a
// terminal: NewProgress returns a no-op when w is not one, so logs, pipes,
// cron mail and tests never receive bar redraws.
type Progress interface {
	// Add advances the bar by n units.
	Add(n int)
	// Describe replaces the text before the bar.
	Describe(desc string)
	// Finish completes and clears the bar.
	Finish()
}

// NewProgress returns a bar counting total items (sessions, entries) drawn
// on w when w is a terminal, else a Progress that does nothing. A total of
// -1 draws a spinner.
func NewProgress(w io.Writer, total int, desc string) Progress {
	return newProgress(w, int64(total), desc, progressbar.OptionShowCount())
}

// NewBytesProgress is NewProgress for a total counted in bytes.
func NewBytesProgress(w io.Writer, total int64, desc string) Progress {
	return newProgress(w, total, desc, progressbar.OptionShowBytes(true))
}

func newProgress(w io.Writer, total int64, desc string, unit progressbar.Option) Progress {
	f, ok := w.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return noProgress{}
	}
	return &barProgress{bar: progressbar.NewOptions64(total,
		progressbar.OptionSetWriter(f),
		progressbar.OptionSetDescription(desc),
		unit,
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionClearOnFinish(),
		progressbar.OptionFullWidth(),
	)}
}

type noProgress struct{}

func (noProgress) Add(int)         {}
func (noProgress) Describe(string) {}
func (noProgress) Finish()         {}

type barProgress struct{ bar *progressbar.ProgressBar }

// The bar's write errors are dropped on purpose: a broken terminal must not
// fail a migration.
func (p *barProgress) Add(n int)            { _ = p.bar.Add(n) }
func (p *barProgress) Describe(desc string) { p.bar.Describe(desc) }
func (p *barProgress) Finish()              { _ = p.bar.Finish() }
