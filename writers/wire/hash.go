package wire

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash"
	"hash/crc32"
)

// castagnoli is built once, at package initialisation, so that the first
// CRC of a hot loop does not pay for it and concurrent first calls do not
// race to build it; it is the package's only mutable-looking state and is
// never written after init.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

const upperHex = "0123456789ABCDEF"

// ChainGenesis is the hash chain's value before the first frame (§4).
const ChainGenesis = "0000000000000000000000000000000000000000000000000000000000000000"

// EmptyCRC32C is the manifest's lastCrc32c for an empty store.
const EmptyCRC32C = "00000000"

// CRC32C returns the CRC-32C (Castagnoli) of b as 8 upper-case hex digits.
func CRC32C(b []byte) string {
	return FormatCRC32C(crc32.Checksum(b, castagnoli))
}

// UpdateCRC32C returns the CRC-32C of the bytes crc was the CRC-32C of
// followed by b (crc 0 starts).
func UpdateCRC32C(crc uint32, b []byte) uint32 { return crc32.Update(crc, castagnoli, b) }

// CRC32CValue returns the CRC-32C of b as a number.
func CRC32CValue(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// FormatCRC32C writes a CRC-32C value as 8 upper-case hex digits.
func FormatCRC32C(c uint32) string {
	var b [8]byte
	for i := 7; i >= 0; i-- {
		b[i] = upperHex[c&0xF]
		c >>= 4
	}
	return string(b[:])
}

// PayloadSHA256 returns the lower-case hex SHA-256 of the payload bytes.
func PayloadSHA256(payload []byte) string {
	sum := sha256.Sum256(payload)
	return hex.EncodeToString(sum[:])
}

// ChainStep returns hex(SHA-256(prev || payloadSHA)): the two lower-case hex
// strings concatenated as text, not as raw digests (§4).
func ChainStep(prev, payloadSHA string) string {
	var buf [128]byte
	b := append(append(buf[:0], prev...), payloadSHA...)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// ManifestHash returns the SHA-256 of the compact serialization of m with
// integrity.manifestHash set to "" (§5); m's own ManifestHash is ignored.
func ManifestHash(m Manifest) string {
	m.Integrity.ManifestHash = ""
	var buf [1024]byte // a manifest is under 1 KB: no allocation
	sum := sha256.Sum256(AppendManifestCompact(buf[:0], m))
	return hex.EncodeToString(sum[:])
}

// EntryDigest accumulates the (id, parent, type) of a sequence of entries:
// the writer's side of what a staging store was meant to hold, compared
// with the same digest of the frames read back (verify.VerifiedStaged), so
// that the source need not be parsed a second time. Payloads are covered
// by the hash chain.
type EntryDigest struct {
	h   hash.Hash
	buf []byte
}

// Add appends one entry. The fields are separated by bytes that no entry
// id or type contains (§2: ids match ^[A-Za-z0-9_-]+$).
func (d *EntryDigest) Add(id, parent, typ string) {
	if d.h == nil {
		d.h = sha256.New()
	}
	d.buf = append(append(append(append(append(append(d.buf[:0], id...), 0), parent...), 0), typ...), '\n')
	d.h.Write(d.buf)
}

// Sum is the digest of the entries added so far (that of no entry when
// none was).
func (d *EntryDigest) Sum() [32]byte {
	var out [32]byte
	if d.h == nil {
		return sha256.Sum256(nil)
	}
	d.h.Sum(out[:0])
	return out
}

// SHA256StateLength returns how many bytes a SHA-256 state (crypto/sha256's
// MarshalBinary, kept in refresh records to go on hashing without reading
// the bytes again) has hashed: its last 8 bytes, big-endian, after the
// magic "sha\x03" and the 96 bytes of chaining values and pending block.
func SHA256StateLength(state []byte) (uint64, bool) {
	const size = 4 + 32 + 64 + 8
	if len(state) != size || string(state[:4]) != "sha\x03" {
		return 0, false
	}
	return binary.BigEndian.Uint64(state[size-8:]), true
}
