package cmd

import (
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/libp2p/go-libp2p/core/crypto"
	pb "github.com/libp2p/go-libp2p/core/crypto/pb"
)

func TestKeyFileCreatedThenReused(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "node.key")
	key, created, err := loadOrCreateKey(path)
	if err != nil {
		t.Fatal(err)
	}
	if !created || key.Type() != pb.KeyType_Ed25519 {
		t.Fatalf("created %v, key type %v; want a new Ed25519 key", created, key.Type())
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if runtime.GOOS != "windows" && fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %#o, want 0600", fi.Mode().Perm())
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	onDisk, err := crypto.UnmarshalPrivateKey(data)
	if err != nil || !onDisk.Equals(key) {
		t.Fatalf("the file does not hold the returned key (%v)", err)
	}
	again, created, err := loadOrCreateKey(path)
	if err != nil {
		t.Fatal(err)
	}
	if created || !again.Equals(key) {
		t.Fatalf("second load: created %v, same key %v; want the same key, not created", created, again.Equals(key))
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("directory holds %d entries, want only the key file", len(entries))
	}
}

func TestKeyFileOtherKeyTypes(t *testing.T) {
	// A key the user made with other tools is used as it is.
	key, _, err := crypto.GenerateSecp256k1Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	data, err := crypto.MarshalPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "secp.key")
	if err := os.WriteFile(path, data, 0o400); err != nil {
		t.Fatal(err)
	}
	got, created, err := loadOrCreateKey(path)
	if err != nil || created || !got.Equals(key) {
		t.Fatalf("got created %v, err %v; want the file's key", created, err)
	}
}

func TestKeyFileMissingDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "absent")
	path := filepath.Join(dir, "node.key")
	_, _, err := loadOrCreateKey(path)
	if err == nil || !errors.As(err, new(usageError)) {
		t.Fatalf("error %v, want bad input", err)
	}
	if want := "key file " + path + ": directory " + dir + " does not exist"; !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q, want it to contain %q", err, want)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the directory was created (%v)", err)
	}
}

func TestKeyFileBadMode(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no owner/group/other permission bits")
	}
	key, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := crypto.MarshalPrivateKey(key)
	for mode, text := range map[os.FileMode]string{0o644: "0644", 0o640: "0640", 0o604: "0604", 0o660: "0660", 0o701: "0701"} {
		path := filepath.Join(t.TempDir(), "node.key")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		_, _, err := loadOrCreateKey(path)
		if err == nil || !errors.As(err, new(usageError)) {
			t.Fatalf("mode %#o: error %v, want bad input", mode, err)
		}
		want := "key file " + path + " has mode " + text + "; it must be readable by its owner only (chmod 600 " + path + ")"
		if err.Error() != want {
			t.Fatalf("mode %#o: error\n%q\nwant\n%q", mode, err, want)
		}
		if b, _ := os.ReadFile(path); string(b) != string(data) {
			t.Fatal("the key file was changed")
		}
	}
}

func TestKeyFileBadContent(t *testing.T) {
	key, pub, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	pubBytes, _ := crypto.MarshalPublicKey(pub)
	raw, _ := key.Raw()
	cases := map[string][]byte{
		"empty":      {},
		"text":       []byte("-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEI\n-----END PRIVATE KEY-----\n"),
		"public key": pubBytes,
		"raw bytes":  raw,
	}
	for name, data := range cases {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "node.key")
			if err := os.WriteFile(path, data, 0o600); err != nil {
				t.Fatal(err)
			}
			_, created, err := loadOrCreateKey(path)
			if err == nil || created || !errors.As(err, new(usageError)) {
				t.Fatalf("created %v, error %v; want bad input", created, err)
			}
			want := "key file " + path + " does not hold a libp2p private key: "
			if !strings.HasPrefix(err.Error(), want) || len(err.Error()) == len(want) {
				t.Fatalf("error %q, want %q and the cause", err, want)
			}
			if b, _ := os.ReadFile(path); string(b) != string(data) {
				t.Fatal("the key file was replaced")
			}
		})
	}
}

func TestKeyFileNotAFile(t *testing.T) {
	path := t.TempDir()
	_, _, err := loadOrCreateKey(path)
	if err == nil || !strings.Contains(err.Error(), "key file "+path+" is not a regular file") {
		t.Fatalf("error %v, want a refusal naming %s", err, path)
	}

	big := filepath.Join(t.TempDir(), "big.key")
	if err := os.WriteFile(big, make([]byte, maxKeyFileBytes+1), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := loadOrCreateKey(big); err == nil || !strings.Contains(err.Error(), "more than any libp2p private key") {
		t.Fatalf("error %v, want a refusal of the size", err)
	}
}
