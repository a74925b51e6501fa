// Package testutil is what the real storage servers of
// [github.com/cairnhq/state/testutil/garage] and
// [github.com/cairnhq/state/testutil/versitygw] offer a test: [S3Server],
// with its endpoint and credentials, fresh buckets, backends, URLs and an
// independent client to check what a bucket really holds.
//
// # Missing servers
//
// A test that needs a server whose binary cannot be found is skipped with a
// message saying how to install it, unless the environment variable
// CAIRN_REQUIRE_SERVERS=1 is set (make test and CI set it): then it fails,
// so that a green CI run cannot hide a skipped server.
package testutil
