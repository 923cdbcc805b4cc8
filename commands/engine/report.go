package engine

// Tally is what every report tells the exit-code mapping: how many problems
// were found and how many of those were repaired.
type Tally struct {
	Problems int `json:"problems"`
	Repaired int `json:"repaired"`
}

// Left is the number of problems found and not repaired.
func (t Tally) Left() int { return t.Problems - t.Repaired }

// Report is implemented by every engine report.
type Report interface {
	Tally() Tally
}
