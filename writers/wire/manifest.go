package wire

import "strconv"

// MaxDocumentBytes bounds the pretty-printed documents: manifest,
// checkpoint and rollback intent (1 MiB each).
const MaxDocumentBytes = 1 << 20

// Manifest is manifest.json (FORMAT.md §5). schema and storeVersion are
// constants that AppendManifest writes and ParseManifest checks.
type Manifest struct {
	SessionID    string
	SourceFormat SourceFormat
	CreatedAt    string
	UpdatedAt    string
	Head         Head
	Counters     Counters
	Files        Files
	Integrity    Integrity
	Invariants   Invariants
}

// Head is the last entry of the store; all zero for an empty store.
type Head struct {
	SegmentSeq uint64
	EntrySeq   uint64
	EntryID    string
}

// Counters are the manifest's counters.
type Counters struct {
	EntriesTotal     uint64
	MessagesTotal    uint64 // frames of type message
	BranchesTotal    uint64 // parent ids with more than one child
	CompactionsTotal uint64
	BytesTotal       uint64 // sum of frame line lengths with newlines
}

// Files names the store's parts; every member but SegmentCount is fixed.
type Files struct {
	SegmentDir          string
	SegmentCount        uint64 // distinct segment numbers in the index
	IndexPath           string
	CheckpointDir       string
	MigrationLedgerPath string
}

// StoreFiles returns Files with the fixed names and segmentCount n.
func StoreFiles(n uint64) Files {
	return Files{
		SegmentDir:          FilesSegmentDir,
		SegmentCount:        n,
		IndexPath:           FilesIndexPath,
		CheckpointDir:       FilesCheckpointDir,
		MigrationLedgerPath: FilesMigrationLedgerPath,
	}
}

// Integrity holds the manifest's digests.
type Integrity struct {
	ChainHash    string
	ManifestHash string
	LastCRC32C   string
}

// Invariants are the reference's checks (§5), not the ADR's INV texts.
type Invariants struct {
	ParentLinksClosed        bool
	MonotonicEntrySeq        bool
	MonotonicSegmentSeq      bool
	IndexWithinSegmentBounds bool
	BranchHeadsIndexed       bool // every segment byte is covered by an index row
	CheckpointsMonotonic     bool
	HashChainValid           bool
}

// AllInvariants returns Invariants with every member true.
func AllInvariants() Invariants {
	return Invariants{true, true, true, true, true, true, true}
}

// False returns the member names of the invariants that are false, in
// document order.
func (iv Invariants) False() []string {
	var out []string
	for i, ok := range iv.list() {
		if !ok {
			out = append(out, invariantNames[i])
		}
	}
	return out
}

func (iv Invariants) list() []bool {
	return []bool{iv.ParentLinksClosed, iv.MonotonicEntrySeq, iv.MonotonicSegmentSeq,
		iv.IndexWithinSegmentBounds, iv.BranchHeadsIndexed, iv.CheckpointsMonotonic, iv.HashChainValid}
}

var (
	manifestNames  = []string{"schema", "storeVersion", "sessionId", "sourceFormat", "createdAt", "updatedAt", "head", "counters", "files", "integrity", "invariants"}
	headNames      = []string{"segmentSeq", "entrySeq", "entryId"}
	counterNames   = []string{"entriesTotal", "messagesTotal", "branchesTotal", "compactionsTotal", "bytesTotal"}
	filesNames     = []string{"segmentDir", "segmentCount", "indexPath", "checkpointDir", "migrationLedgerPath"}
	integrityNames = []string{"chainHash", "manifestHash", "lastCrc32c"}
	invariantNames = []string{"parentLinksClosed", "monotonicEntrySeq", "monotonicSegmentSeq", "indexWithinSegmentBounds", "branchHeadsIndexed", "checkpointsMonotonic", "hashChainValid"}
)

func (m Manifest) value() Value {
	inv := m.Invariants.list()
	invMembers := make([]Member, len(inv))
	for i, ok := range inv {
		invMembers[i] = Member{invariantNames[i], Bool(ok)}
	}
	return Object(
		Member{"schema", String(SchemaManifest)},
		Member{"storeVersion", U64(StoreVersion)},
		Member{"sessionId", String(m.SessionID)},
		Member{"sourceFormat", String(string(m.SourceFormat))},
		Member{"createdAt", String(m.CreatedAt)},
		Member{"updatedAt", String(m.UpdatedAt)},
		Member{"head", Object(
			Member{"segmentSeq", U64(m.Head.SegmentSeq)},
			Member{"entrySeq", U64(m.Head.EntrySeq)},
			Member{"entryId", String(m.Head.EntryID)},
		)},
		Member{"counters", Object(
			Member{"entriesTotal", U64(m.Counters.EntriesTotal)},
			Member{"messagesTotal", U64(m.Counters.MessagesTotal)},
			Member{"branchesTotal", U64(m.Counters.BranchesTotal)},
			Member{"compactionsTotal", U64(m.Counters.CompactionsTotal)},
			Member{"bytesTotal", U64(m.Counters.BytesTotal)},
		)},
		Member{"files", Object(
			Member{"segmentDir", String(m.Files.SegmentDir)},
			Member{"segmentCount", U64(m.Files.SegmentCount)},
			Member{"indexPath", String(m.Files.IndexPath)},
			Member{"checkpointDir", String(m.Files.CheckpointDir)},
			Member{"migrationLedgerPath", String(m.Files.MigrationLedgerPath)},
		)},
		Member{"integrity", Object(
			Member{"chainHash", String(m.Integrity.ChainHash)},
			Member{"manifestHash", String(m.Integrity.ManifestHash)},
			Member{"lastCrc32c", String(m.Integrity.LastCRC32C)},
		)},
		Member{"invariants", Object(invMembers...)},
	)
}

// AppendManifest appends m pretty-printed (no trailing newline), members in
// spec order, exactly as written to manifest.json.
func AppendManifest(dst []byte, m Manifest) []byte { return AppendPretty(dst, m.value()) }

// AppendManifestCompact appends m compact: the form ManifestHash digests.
// It writes the document directly, the bytes AppendCompact gives m's value
// (FuzzManifestCompactEncoding): a manifest is hashed each time one is
// read or written, and the general encoder's value tree was most of that.
func AppendManifestCompact(dst []byte, m Manifest) []byte {
	str := func(dst []byte, key, s string) []byte {
		return AppendString(append(dst, key...), s)
	}
	num := func(dst []byte, key string, n uint64) []byte {
		return strconv.AppendUint(append(dst, key...), n, 10)
	}
	dst = str(dst, `{"schema":`, SchemaManifest)
	dst = num(dst, `,"storeVersion":`, StoreVersion)
	dst = str(dst, `,"sessionId":`, m.SessionID)
	dst = str(dst, `,"sourceFormat":`, string(m.SourceFormat))
	dst = str(dst, `,"createdAt":`, m.CreatedAt)
	dst = str(dst, `,"updatedAt":`, m.UpdatedAt)
	dst = num(dst, `,"head":{"segmentSeq":`, m.Head.SegmentSeq)
	dst = num(dst, `,"entrySeq":`, m.Head.EntrySeq)
	dst = str(dst, `,"entryId":`, m.Head.EntryID)
	dst = num(dst, `},"counters":{"entriesTotal":`, m.Counters.EntriesTotal)
	dst = num(dst, `,"messagesTotal":`, m.Counters.MessagesTotal)
	dst = num(dst, `,"branchesTotal":`, m.Counters.BranchesTotal)
	dst = num(dst, `,"compactionsTotal":`, m.Counters.CompactionsTotal)
	dst = num(dst, `,"bytesTotal":`, m.Counters.BytesTotal)
	dst = str(dst, `},"files":{"segmentDir":`, m.Files.SegmentDir)
	dst = num(dst, `,"segmentCount":`, m.Files.SegmentCount)
	dst = str(dst, `,"indexPath":`, m.Files.IndexPath)
	dst = str(dst, `,"checkpointDir":`, m.Files.CheckpointDir)
	dst = str(dst, `,"migrationLedgerPath":`, m.Files.MigrationLedgerPath)
	dst = str(dst, `},"integrity":{"chainHash":`, m.Integrity.ChainHash)
	dst = str(dst, `,"manifestHash":`, m.Integrity.ManifestHash)
	dst = str(dst, `,"lastCrc32c":`, m.Integrity.LastCRC32C)
	dst = append(dst, `},"invariants":{`...)
	for i, ok := range m.Invariants.list() {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = strconv.AppendBool(append(AppendString(dst, invariantNames[i]), ':'), ok)
	}
	return append(dst, '}', '}')
}

// CheckManifest applies the reference's manifest document rules to m (all
// but the hash): session id a UUID, known source format, RFC 3339 times,
// head and segment count coupled to entriesTotal, hex digests, fixed file
// names. It does not look at the invariants: a false one is the reader's
// finding, not a malformed document.
func CheckManifest(m Manifest) error {
	fail := func(member, reason string) error { return docErr(DocManifest, member, reason) }
	switch {
	case !ValidUUID(m.SessionID):
		return fail("sessionId", "must be a UUID")
	case !m.SourceFormat.Valid():
		return fail("sourceFormat", "unsupported source format")
	case !ValidRFC3339(m.CreatedAt):
		return fail("createdAt", "not an RFC 3339 timestamp")
	case !ValidRFC3339(m.UpdatedAt):
		return fail("updatedAt", "not an RFC 3339 timestamp")
	}
	if m.Counters.EntriesTotal == 0 {
		if m.Head.SegmentSeq != 0 || m.Head.EntrySeq != 0 || m.Head.EntryID != "" || m.Files.SegmentCount != 0 {
			return fail("head", "an empty manifest must have a zero head and segmentCount 0")
		}
	} else {
		if m.Head.SegmentSeq == 0 || m.Head.EntrySeq == 0 || m.Files.SegmentCount == 0 {
			return fail("head", "a non-empty manifest must have a positive head and segmentCount")
		}
		if !ValidEntryID(m.Head.EntryID) {
			return fail("head.entryId", "does not match the V2 entry-id contract")
		}
	}
	switch {
	case !ValidSHA256Hex(m.Integrity.ChainHash):
		return fail("integrity.chainHash", "not a lower-case SHA-256 hex digest")
	case !ValidSHA256Hex(m.Integrity.ManifestHash):
		return fail("integrity.manifestHash", "not a lower-case SHA-256 hex digest")
	case !ValidCRC32C(m.Integrity.LastCRC32C):
		return fail("integrity.lastCrc32c", "not 8 upper-case hex digits")
	case m.Files.SegmentDir != FilesSegmentDir:
		return fail("files.segmentDir", "must be "+FilesSegmentDir)
	case m.Files.IndexPath != FilesIndexPath:
		return fail("files.indexPath", "must be "+FilesIndexPath)
	case m.Files.CheckpointDir != FilesCheckpointDir:
		return fail("files.checkpointDir", "must be "+FilesCheckpointDir)
	case m.Files.MigrationLedgerPath != FilesMigrationLedgerPath:
		return fail("files.migrationLedgerPath", "must be "+FilesMigrationLedgerPath)
	}
	return nil
}

// ParseManifest decodes manifest.json and checks it as the reference reads
// a manifest: at most 1 MiB, no unknown or duplicate members, CheckManifest's
// rules, and manifestHash equal to ManifestHash of the parsed document (not
// of the file's bytes). A hash mismatch matches ErrChecksum.
func ParseManifest(b []byte) (Manifest, error) {
	if len(b) > MaxDocumentBytes {
		return Manifest{}, &DocError{Doc: DocManifest, Reason: "exceeds the 1 MiB read limit", Err: ErrTooLarge}
	}
	v, err := parseDoc(DocManifest, b, nil)
	if err != nil {
		return Manifest{}, err
	}
	d := decodeObject(DocManifest, "", v, manifestNames, false)
	d.check(0, d.str(0) == SchemaManifest, "unsupported schema")
	version := d.u64(1)
	d.check(1, version <= 255, "integer out of range for u8")
	d.check(1, version == StoreVersion, "unsupported storeVersion")
	var m Manifest
	m.SessionID = d.str(2)
	m.SourceFormat = SourceFormat(d.str(3))
	m.CreatedAt = d.str(4)
	m.UpdatedAt = d.str(5)

	h := d.nested(6, headNames, false)
	m.Head = Head{SegmentSeq: h.u64(0), EntrySeq: h.u64(1), EntryID: h.str(2)}
	d.join(h)

	c := d.nested(7, counterNames, false)
	m.Counters = Counters{c.u64(0), c.u64(1), c.u64(2), c.u64(3), c.u64(4)}
	d.join(c)

	f := d.nested(8, filesNames, false)
	m.Files = Files{f.str(0), f.u64(1), f.str(2), f.str(3), f.str(4)}
	d.join(f)

	g := d.nested(9, integrityNames, false)
	m.Integrity = Integrity{g.str(0), g.str(1), g.str(2)}
	d.join(g)

	n := d.nested(10, invariantNames, false)
	m.Invariants = Invariants{n.boolean(0), n.boolean(1), n.boolean(2), n.boolean(3), n.boolean(4), n.boolean(5), n.boolean(6)}
	d.join(n)

	if err := d.error(); err != nil {
		return Manifest{}, err
	}
	if err := CheckManifest(m); err != nil {
		return Manifest{}, err
	}
	if want := ManifestHash(m); m.Integrity.ManifestHash != want {
		return Manifest{}, &DocError{Doc: DocManifest, Member: "integrity.manifestHash",
			Reason: "does not match the manifest (recomputed " + want + ")", Err: ErrChecksum}
	}
	return m, nil
}
