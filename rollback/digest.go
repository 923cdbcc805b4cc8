package rollback

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"syscall"

	"pisess/writers/durable"
)

// digest is what a rollback knows of a file's bytes.
type digest struct {
	size int64
	sha  string
	// prefix is the length of the first prefix of the file that ends a
	// line and whose SHA-256 is the one asked for; -1 when none is.
	prefix int64
}

// fileDigest hashes the regular file at path, streaming (a session can be
// large). With wantPrefix set it also finds where, if anywhere, a line
// boundary closes a prefix with that SHA-256: how a rollback tells that pi
// appended entries to a file after the run wrote it (the file then starts
// with exactly the bytes the run wrote). Only line boundaries are tried,
// because pi appends whole lines; each try costs one SHA-256 finalisation.
func fileDigest(ops durable.Ops, path, wantPrefix string) (digest, error) {
	f, err := ops.OpenNoFollow(path, syscall.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return digest{}, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return digest{}, err
	}
	if !fi.Mode().IsRegular() {
		return digest{}, fmt.Errorf("%s: not a regular file", path)
	}
	h := sha256.New()
	d := digest{prefix: -1}
	buf := make([]byte, 256<<10)
	var sum [sha256.Size]byte
	for {
		n, rerr := f.Read(buf)
		chunk := buf[:n]
		for len(chunk) > 0 {
			if wantPrefix == "" || d.prefix >= 0 {
				h.Write(chunk)
				d.size += int64(len(chunk))
				break
			}
			i := bytes.IndexByte(chunk, '\n')
			if i < 0 {
				h.Write(chunk)
				d.size += int64(len(chunk))
				break
			}
			h.Write(chunk[:i+1])
			d.size += int64(i + 1)
			chunk = chunk[i+1:]
			if hex.EncodeToString(h.Sum(sum[:0])) == wantPrefix {
				d.prefix = d.size
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return digest{}, fmt.Errorf("read %s: %w", path, rerr)
		}
	}
	d.sha = hex.EncodeToString(h.Sum(nil))
	return d, nil
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
