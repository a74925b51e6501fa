package testkit

// SecretURL is a store URL carrying credentials, and the substrings of it
// that must never be printed.
type SecretURL struct {
	Name    string
	URL     string
	Secrets []string
}

// SecretURLs hide credentials in each place a URL can hold them. Their
// endpoints are closed ports: anything that tries to reach one fails, and
// its failure must not echo the credentials either.
var SecretURLs = []SecretURL{
	{"userinfo", "s3://AKIDUSER:SECRETPASS@bucket?endpoint=http://127.0.0.1:1&region=x", []string{"AKIDUSER", "SECRETPASS"}},
	{"userinfo, upper-case scheme", "S3://AKIDUSER:SECRETPASS@bucket?endpoint=http://127.0.0.1:1&region=x", []string{"AKIDUSER", "SECRETPASS"}},
	{"quoted userinfo", `"s3://AKIDUSER:SECRETPASS@bucket?endpoint=http://127.0.0.1:1"`, []string{"AKIDUSER", "SECRETPASS"}},
	{"user only", "s3://SECRETUSERONLY@bucket?endpoint=http://127.0.0.1:1", []string{"SECRETUSERONLY"}},
	{"endpoint userinfo", "s3://bucket?endpoint=http://AKIDUSER:SECRETPASS@127.0.0.1:1&region=x", []string{"AKIDUSER", "SECRETPASS"}},
	{"endpoint userinfo, encoded", "s3://bucket?endpoint=http%3A%2F%2FAKIDUSER%3ASECRETPASS%40127.0.0.1%3A1&region=x", []string{"AKIDUSER", "SECRETPASS"}},
	{"endpoint without scheme", "s3://bucket?endpoint=AKIDUSER:SECRETPASS@127.0.0.1:1", []string{"AKIDUSER", "SECRETPASS"}},
	{"query token", "s3://bucket?endpoint=http://127.0.0.1:1&region=x&X-Amz-Security-Token=SECRETTOKEN", []string{"SECRETTOKEN"}},
	{"query secret key", "s3://bucket?endpoint=http://127.0.0.1:1&aws_secret_access_key=SECRETPASS", []string{"SECRETPASS"}},
	{"query secret key, lower-case", "s3://bucket?endpoint=http://127.0.0.1:1&aws_secret_access_key=secretpass", []string{"secretpass"}},
	{"file userinfo", "file://AKIDUSER:SECRETPASS@localhost/tmp/x", []string{"AKIDUSER", "SECRETPASS"}},
	{"unparsable", "s3://AKIDUSER:SECRETPASS@bucket/%zz?endpoint=http://127.0.0.1:1", []string{"AKIDUSER", "SECRETPASS"}},
	{"unknown scheme", "ftp://AKIDUSER:SECRETPASS@host/x", []string{"AKIDUSER", "SECRETPASS"}},
}
