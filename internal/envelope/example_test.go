package envelope_test

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"filippo.io/age"

	"github.com/cairnhq/state/internal/envelope"
)

func Example() {
	id, err := age.GenerateX25519Identity()
	if err != nil {
		panic(err)
	}
	store := envelope.NewStoreID() // drawn once, when the store is created
	env, err := envelope.New([]age.Identity{id}, nil, envelope.Options{StoreID: store})
	if err != nil {
		panic(err)
	}

	sealed, err := env.Seal("tokens/github", []byte("ghp_example"))
	if err != nil {
		panic(err)
	}
	plaintext, err := env.Open("tokens/github", sealed)
	fmt.Println(string(plaintext), err)

	// The same bytes stored under another name do not open.
	_, err = env.Open("tokens/gitlab", sealed)
	fmt.Println(errors.Is(err, envelope.ErrNameMismatch))

	// Nor in another store, even one with the same key.
	other, err := envelope.New([]age.Identity{id}, nil, envelope.Options{StoreID: envelope.NewStoreID()})
	if err != nil {
		panic(err)
	}
	_, err = other.Open("tokens/github", sealed)
	fmt.Println(errors.Is(err, envelope.ErrForeignStore))

	// Nor does an object sealed by someone who only knows the recipient.
	forger, err := envelope.New([]age.Identity{mustX25519()}, []age.Recipient{id.Recipient()}, envelope.Options{StoreID: store})
	if err != nil {
		panic(err)
	}
	forged, err := forger.Seal("tokens/github", []byte("evil"))
	if err != nil {
		panic(err)
	}
	_, err = env.Open("tokens/github", forged)
	fmt.Println(errors.Is(err, envelope.ErrTampered), errors.Is(err, envelope.ErrUnauthenticated))
	// Output:
	// ghp_example <nil>
	// true
	// true
	// true true
}

func mustX25519() *age.X25519Identity {
	id, err := age.GenerateX25519Identity()
	if err != nil {
		panic(err)
	}
	return id
}

func ExampleParseIdentities() {
	// The format age-keygen writes: comments, then one key per line.
	file := `# created: 2026-01-01T00:00:00Z
# public key: age1zvkyg2lqzraa2lnjvqej32nkuu0ues2s82hzrye869xeexvn73equnujwj
AGE-SECRET-KEY-1GFPYYSJZGFPYYSJZGFPYYSJZGFPYYSJZGFPYYSJZGFPYYSJZGFPQ4EGAEX
`
	ids, err := envelope.ParseIdentities(strings.NewReader(file))
	if err != nil {
		panic(err)
	}
	r, err := envelope.RecipientOf(ids[0])
	if err != nil {
		panic(err)
	}
	fmt.Println(len(ids), r)
	// Output:
	// 1 age1zvkyg2lqzraa2lnjvqej32nkuu0ues2s82hzrye869xeexvn73equnujwj
}

func ExampleParseRecipient() {
	// A secret key where a recipient belongs is refused, and not repeated.
	_, err := envelope.ParseRecipient(`"age-secret-key-1gfpyysjzgfpyysjzgfpyysjzgfpyysjzgfpyysjzgfpyysjzgfpq4egaex"`)
	fmt.Println(err)
	// Output:
	// invalid recipient: this looks like secret key material (an age identity), not a recipient; it is not repeated here (age-keygen -y prints an identity's recipient)
}

// A recovery key is sealed to but never writes: it can read every object,
// in an emergency, only when it is given as a recovery identity, and the
// open says it was unauthenticated.
func ExampleOptions_recovery() {
	writer, recovery := mustX25519(), mustX25519()
	env, err := envelope.New([]age.Identity{writer}, []age.Recipient{recovery.Recipient()}, envelope.Options{})
	if err != nil {
		panic(err)
	}
	sealed, err := env.Seal("db/main", []byte("rows"))
	if err != nil {
		panic(err)
	}

	strict, err := envelope.New([]age.Identity{recovery}, nil, envelope.Options{})
	if err != nil {
		panic(err)
	}
	_, err = strict.Open("db/main", sealed)
	fmt.Println(errors.Is(err, envelope.ErrUnauthenticated))

	emergency, err := envelope.New(nil, nil, envelope.Options{
		Recovery: []age.Identity{recovery},
		Logger:   slog.New(slog.DiscardHandler),
	})

	if err != nil {
		panic(err)
	}
	plaintext, info, err := emergency.OpenWithInfo("db/main", sealed)
	fmt.Println(string(plaintext), info.Unauthenticated, err)
	// Output:
	// true
	// rows true <nil>
}

// The store layer learns its store id from its own .store object before it
// can open it: it peeks (unauthenticated), then opens with an envelope
// bound to that id, which authenticates it.
func ExamplePeekHeader() {
	id := mustX25519()
	store := envelope.NewStoreID()
	creator, err := envelope.New([]age.Identity{id}, nil, envelope.Options{StoreID: store})
	if err != nil {
		panic(err)
	}
	sealed, err := creator.SealStamped(".store", []byte(`{"version":2}`), envelope.Stamp{Generation: 1}, envelope.Writer{})
	if err != nil {
		panic(err)
	}

	h, err := envelope.PeekHeader(".store", sealed)
	if err != nil {
		panic(err)
	}
	env, err := envelope.New([]age.Identity{id}, nil, envelope.Options{StoreID: h.StoreID})
	if err != nil {
		panic(err)
	}
	plaintext, info, err := env.OpenWithInfo(".store", sealed)
	fmt.Println(h.StoreID == store, h.Stamp.Generation, string(plaintext), info.SameRecipients, info.Stamp == h.Stamp, err)
	// Output:
	// true 1 {"version":2} true true <nil>
}

// The writer of an object — its instance, host and process — is sealed
// in its header, encrypted: a reader learns it from the header alone,
// authenticated, without reading the object whole; the bytes in storage
// do not show it.
func ExampleEnvelope_OpenHeader() {
	env, err := envelope.New([]age.Identity{mustX25519()}, nil, envelope.Options{})
	if err != nil {
		panic(err)
	}
	writer := envelope.Writer{Instance: "pod-a", Hostname: "node-1", PID: 4242}
	sealed, err := env.SealStamped("app/token", []byte("s3cr3t"), envelope.Stamp{Epoch: 7, Sequence: 41}, writer)
	if err != nil {
		panic(err)
	}
	n, _, err := envelope.HeaderLen("app/token", sealed[:envelope.FixedHeaderLen])
	if err != nil {
		panic(err)
	}
	info, err := env.OpenHeader("app/token", sealed[:n], int64(len(sealed)))
	fmt.Println(info.Writer.Instance, info.Writer.Hostname, info.Writer.PID, info.Stamp.Epoch, info.Stamp.Sequence, err)
	fmt.Println(bytes.Contains(sealed, []byte("pod-a")), bytes.Contains(sealed, []byte("node-1")))
	// Output:
	// pod-a node-1 4242 7 41 <nil>
	// false false
}

// Recover checks that stock age alone (age.Decrypt, after stripping the
// header) reads an object with a given identity, without returning the
// plaintext.
func ExampleRecover() {
	writer, recovery := mustX25519(), mustX25519()
	env, err := envelope.New([]age.Identity{writer}, []age.Recipient{recovery.Recipient()}, envelope.Options{})
	if err != nil {
		panic(err)
	}
	sealed, err := env.Seal("db/main", []byte("rows"))
	if err != nil {
		panic(err)
	}
	fmt.Println(envelope.Recover("db/main", sealed, nil, recovery))
	fmt.Println(errors.Is(envelope.Recover("db/main", sealed, nil, mustX25519()), envelope.ErrNoMatchingIdentity))
	// Output:
	// <nil>
	// true
}

func ExampleNewPassphraseIdentity() {
	// MinWorkFactor (16) keeps the example fast; use 0 (age's default,
	// 18) or more in production.
	pass, err := envelope.NewPassphraseIdentity("a long and unguessable passphrase", envelope.MinWorkFactor)
	if err != nil {
		panic(err)
	}
	env, err := envelope.New([]age.Identity{pass}, nil, envelope.Options{StoreID: envelope.NewStoreID()})
	if err != nil {
		panic(err)
	}
	sealed, err := env.Seal("config", []byte("v=1"))
	if err != nil {
		panic(err)
	}
	plaintext, err := env.Open("config", sealed)
	fmt.Println(string(plaintext), env.Recipients(), err)
	// Output:
	// v=1 [scrypt] <nil>
}
