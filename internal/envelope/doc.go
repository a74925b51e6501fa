// Package envelope seals and opens one state object with age
// (filippo.io/age), bound to the object's name and to its store, and
// authenticated by the writer's identity.
//
// An [Envelope] is built from the writer identities it seals and opens
// with, any extra recipients it also seals to (a recovery key, say), and
// [Options] (the zero value means the defaults):
//
//	ids, err := envelope.LoadIdentityFile("/etc/app/identity.txt")
//	recovery, err := envelope.ParseRecipient("age1…")
//	env, err := envelope.New(ids, []age.Recipient{recovery}, envelope.Options{StoreID: id})
//	sealed, err := env.Seal("tokens/github", plaintext)
//	plaintext, err = env.Open("tokens/github", sealed)
//
// # What a sealed object is
//
// A sealed object (format 4, docs/adr/0064-writer-sealed-in-the-header.md)
// is a small header followed by a complete, ordinary age file sealed to
// every recipient of the envelope's sealing set. The header holds a magic
// and version, the object's name, its total length, the [StoreID] of its
// store, a digest of the recipient set it was sealed to, a [Stamp] (the
// store's manifest generation, the writer's fencing epoch and write
// sequence), the [Writer] (the instance, host and process whose write made
// it, encrypted under a key derived from the object's file key, in a field
// of one fixed length), both given to [Envelope.SealStamped], the SHA-256
// of the age file when it is content-bound, and one authentication stanza
// per writer identity in that set: the age file key wrapped under a
// symmetric key derived from that identity's secret, with the whole header
// before it as associated data. Because the rest is
// plain age, anyone holding an identity or a recovery key can decrypt an
// object with the stock age tool after stripping the header, should this
// library be gone (the README and the ADR give the command; [Recover] does
// the same with age.Decrypt). Every object Open accepts has an age part
// that the stock age parser accepts: its age header goes through age's own
// parser (age.ExtractHeader) and MAC check.
//
// # Authenticity
//
// age alone lets anyone who knows a public recipient produce a file that
// decrypts. Open therefore accepts an object only if one of its
// authentication stanzas unwraps with a writer identity's key, which only a
// holder of that identity can have written, and the header — name, store
// id, recipient digest, stamp, writer, length — and the age file all
// verify under the file key it yields ([Envelope.OpenHeader] authenticates
// the header alone: who wrote an object, without reading it whole). An
// object made with only a public recipient fails with [ErrTampered] (and
// [ErrUnauthenticated]). Whenever anyone but the one writer learns the
// file key (more than one authentication stanza, or more than one age
// recipient), the header also carries a SHA-256 of the age file, under the
// stanzas, so that no other key holder — a recovery key, a retired writer
// key — can rewrite the payload under a genuine header.
//
// Identity types that can write (authenticate): age X25519 and
// post-quantum hybrid identities, SSH ed25519 and RSA keys loaded with
// [ParseIdentities] or [ParseSSHIdentity], and [PassphraseIdentity].
// Identities whose secret the envelope cannot reach (age plugins, bare
// agessh identities) can only be recovery identities.
//
// A key that is a recipient but never a writer (a recovery key) can
// decrypt every object but authenticate none: Open fails with
// [ErrUnauthenticated] unless that key is given in [Options.Recovery], in
// an emergency, to read anyway; [Opened.Unauthenticated] then says so. A
// writer identity never opens an object it does not authenticate.
//
// The envelope does not detect replay: an older object of the same name
// and store, put back by someone with write access to the storage, opens.
// Its authenticated [Stamp] is what a caller compares with what it trusts
// (the store refuses an object sealed under a newer manifest generation
// than the manifest it read, which is how a rolled-back manifest shows).
//
// # Stores
//
// An envelope bound to a store ([Options.StoreID]) writes the store id
// into every object and refuses, before trying any key, an object that
// carries another one, or none ([ErrForeignStore]): an object copied from
// another store does not open, whatever it was sealed to. An unbound
// envelope seals and opens only objects bound to no store. [PeekHeader]
// reads an object's store id and stamp without authenticating them, so
// that a store can learn its id from its own records before opening them
// with an envelope bound to it.
// With [Options.ExactRecipients] the envelope seals to a store's recorded
// recipient set rather than to its identities' own recipients, and only
// the identities in that set write stanzas; [Envelope.OpenWithInfo]
// reports whether an object was sealed to exactly that set.
//
// # Cost
//
// Seal pays age's public-key operation once per recipient (two crypto/ecdh
// scalar multiplications for X25519, ADR 0013). Open pays none when a
// writer identity wrote the object: the file key comes from its
// authentication stanza, so opening a small object costs microseconds.
// Content-bound objects cost one SHA-256 pass of the object on each side.
//
// # Large objects
//
// [Envelope.SealTo] seals a reader into a file ([io.WriterAt]) 64 KiB
// chunk by chunk and [Sealing.Finish] writes the header with its stamp;
// [Envelope.OpenReaderAt] authenticates everything but the payload of an
// object in a file, then returns a reader that releases each chunk only
// once it authenticated: a tampered chunk is an error from Read, never
// short data. Same format as Seal and Open.
//
// # Errors
//
// Every failure of Open wraps one of [ErrTooLarge], [ErrNotEnvelope],
// [ErrTruncated], [ErrForeignStore], [ErrTampered],
// [ErrNoMatchingIdentity] or [ErrNameMismatch] and names the object. Errors never
// quote secrets: [ParseRecipient] and [ParseIdentities] refuse key material
// without repeating any of it.
package envelope
