package discover

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
)

// listAccounts asks Directory Services: /etc/passwd on macOS holds only
// system accounts.
func listAccounts(ctx context.Context) ([]Account, error) {
	out, err := exec.CommandContext(ctx, "dscacheutil", "-q", "user").Output()
	if err != nil {
		return nil, fmt.Errorf("user database: dscacheutil -q user: %w", err)
	}
	return ParseDscacheutil(bytes.NewReader(out))
}
