package harness

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/minio/highwayhash"
)

// DropMsgTTL rewrites, in the store directory of a stopped server, the
// configuration of stream (such as "KV_leases") as a server before
// nats-server 2.11 reads it: without per-message TTLs (allow_msg_ttl) or
// subject delete markers (subject_delete_marker_ttl), which such a server
// does not know, and without the API level the stream requires
// (metadata _nats.req.level), which would keep a server that reports a
// lower one from loading it. The server started again on the directory
// then runs the stream without per-message TTLs: messages stored with a
// TTL no longer expire, no delete marker is written, and a write that
// asks for a TTL is refused. It rewrites the file's checksum (meta.sum) as
// nats-server computes it: HighwayHash-64 of the file, keyed by the
// SHA-256 of the stream's directory name.
func DropMsgTTL(storeDir, stream string) error {
	var dir string
	err := filepath.WalkDir(storeDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == stream && filepath.Base(filepath.Dir(path)) == "streams" {
			dir = path
			return filepath.SkipAll
		}
		return nil
	})
	if err != nil {
		return err
	}
	if dir == "" {
		return fmt.Errorf("no stream %s under %s", stream, storeDir)
	}
	meta := filepath.Join(dir, "meta.inf")
	b, err := os.ReadFile(meta)
	if err != nil {
		return err
	}
	var cfg map[string]any
	if err := json.Unmarshal(b, &cfg); err != nil {
		return fmt.Errorf("%s: %w", meta, err)
	}
	if _, ok := cfg["allow_msg_ttl"]; !ok {
		return fmt.Errorf("%s has no allow_msg_ttl: not a stream with per-message TTLs", meta)
	}
	delete(cfg, "allow_msg_ttl")
	delete(cfg, "subject_delete_marker_ttl")
	if md, ok := cfg["metadata"].(map[string]any); ok {
		delete(md, "_nats.req.level")
	}
	if b, err = json.Marshal(cfg); err != nil {
		return err
	}
	key := sha256.Sum256([]byte(stream))
	hh, err := highwayhash.New64(key[:])
	if err != nil {
		return err
	}
	hh.Write(b)
	if err := os.WriteFile(meta, b, 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "meta.sum"), []byte(hex.EncodeToString(hh.Sum(nil))), 0o644)
}
