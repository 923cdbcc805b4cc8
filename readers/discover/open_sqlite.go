package discover

import (
	"pisess/readers"
	"pisess/readers/sqlitev1"
)

func openSQLite(path string) (readers.Source, error) {
	src, err := sqlitev1.Open(path)
	if err != nil {
		return nil, err
	}
	return src, nil
}
