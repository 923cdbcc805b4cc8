// Package payload is the reference's typed session-entry model: it accepts or
// refuses one entry line exactly as the reference's serde model does, emits
// the canonical payload bytes (FORMAT.md §2) and synthesizes legacy ids
// (FORMAT.md §10).
package payload
