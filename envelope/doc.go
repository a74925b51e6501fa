// Package envelope seals and opens one state object with age
// (filippo.io/age), bound to the object's name and authenticated by the
// writer's identity.
//
// An [Envelope] is built from the identities it opens with and any extra
// recipients it also seals to (a recovery key, say):
//
//	ids, err := envelope.LoadIdentityFile("/etc/app/identity.txt")
//	recovery, err := envelope.ParseRecipient("age1…")
//	env, err := envelope.New(ids, []age.Recipient{recovery})
//	sealed, err := env.Seal("tokens/github", plaintext)
//	plaintext, err = env.Open("tokens/github", sealed)
//
// # What a sealed object is
//
// A sealed object is a small header followed by a complete, ordinary age
// file sealed to every recipient: the recipients of the configured
// identities plus the extra ones. The header (docs/adr/0003-envelope-format.md)
// holds a magic and version, the object's name, its total length, and one
// authentication stanza per configured identity: the age file key wrapped
// under a symmetric key derived from that identity's secret. Because the
// rest is plain age, anyone holding an identity or a recovery key can
// decrypt an object with the stock age tool after stripping the header,
// should this library be gone (the ADR gives the command).
//
// # Authenticity
//
// age alone lets anyone who knows a public recipient produce a file that
// decrypts. Open therefore accepts an object only if one of its
// authentication stanzas unwraps with a configured identity's key, which
// only a holder of that identity can have written, and the header, the
// name and the age file all verify under the file key it yields. An object
// made with only a public recipient fails with [ErrTampered] (and
// [ErrUnauthenticated]). When the envelope also seals to recipients that are
// not its own identities, the stanzas further bind a SHA-256 of the age
// file, so that such a recipient, who learns each file key, cannot forge
// objects either.
//
// Identity types that can authenticate: age X25519 and post-quantum hybrid
// identities, SSH ed25519 and RSA keys loaded with [ParseIdentities] or
// [ParseSSHIdentity], and [PassphraseIdentity]. Identities whose secret
// the envelope cannot reach (age plugins, bare agessh identities) can only
// read, and only with [AllowUnauthenticated].
//
// A key that is a recipient but never a configured identity (a recovery
// key) can decrypt every object but authenticate none: with it, Open fails
// with [ErrUnauthenticated] unless [AllowUnauthenticated] is given, in an
// emergency, to read anyway.
//
// The envelope does not detect replay: an older object of the same name,
// put back by someone with write access to the storage, opens. Callers that
// care keep a version or counter inside the plaintext and compare it with
// one they trust.
//
// # Cost
//
// Seal pays age's public-key operation once per recipient. Open pays none
// when a configured identity wrote the object: the file key comes from its
// authentication stanza, so opening a small object costs microseconds.
//
// # Errors
//
// Every failure of Open wraps one of [ErrTooLarge], [ErrNotEnvelope],
// [ErrTruncated], [ErrTampered], [ErrNoIdentity] or [ErrNameMismatch] and
// names the object.
package envelope
