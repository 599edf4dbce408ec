package attack

import (
	"context"
	"strings"
	"testing"

	"github.com/libp2p/go-libp2p/core/crypto"
)

// An unknown kind is refused before a host starts; the quiet baseline and
// every listed kind are known.
func TestNewRefusesUnknownKind(t *testing.T) {
	_, err := New(context.Background(), Config{Kind: "teleport"}, nil)
	if err == nil || !strings.Contains(err.Error(), `unknown attack "teleport"`) {
		t.Fatalf("err = %v, want the unknown kind named", err)
	}
	if _, err := New(context.Background(), Config{Kind: Quiet}, nil); err == nil {
		t.Fatal("an attacker without a key started")
	}
	key, _, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(context.Background(), Config{Kind: Quiet, Key: key, MeshName: "test"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Stop()
	if !a.Member() || a.ID() != a.Host().ID() {
		t.Fatalf("quiet: member %v, id %s, host %s", a.Member(), a.ID(), a.Host().ID())
	}
	if r := a.Report(nil, nil, 10, nil); r != nil {
		t.Fatalf("a quiet member reports %+v, want nothing", r)
	}
}

// Only the outsiders are not members; every membership kind is a kind.
func TestKindsAndMembership(t *testing.T) {
	for _, k := range Kinds {
		if want := k != "nopsk" && k != "notallowed"; IsMember(k) != want {
			t.Errorf("IsMember(%q) = %v, want %v", k, IsMember(k), want)
		}
	}
	for _, k := range MembershipKinds {
		if !strings.Contains(strings.Join(Kinds, ","), k) || !IsMember(k) {
			t.Errorf("membership kind %q missing from Kinds or not a member", k)
		}
	}
	if IsMember("") {
		t.Error("no attack is a member")
	}
}
