package s3

// ParseConditionalMode is parseConditionalMode, for the tests.
var ParseConditionalMode = parseConditionalMode

// IsServerTempName is isServerTempName, for the tests.
var IsServerTempName = isServerTempName
