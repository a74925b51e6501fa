package s3

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/internal/driver"
)

var _ driver.MultiDeleter = (*s3Backend)(nil)

// maxDeleteKeys is how many keys one DeleteObjects request may name (S3's
// limit).
const maxDeleteKeys = 1000

// DeleteMany implements driver.MultiDeleter with DeleteObjects: one
// request per 1000 keys, quiet (the answer lists the keys that failed
// only), retried like every request (deleting again is harmless). A key
// the answer reports as NoSuchKey counts as deleted; AccessDenied maps to
// backend.ErrPermission. The SDK sends the request's checksum that S3
// requires of DeleteObjects (CRC32 since aws-sdk-go-v2's flexible
// checksums, no Content-MD5): versitygw v1.8.0 and Garage 2.5.0 accept it
// (backendtest's DeleteMany cases in TestConformance_Versitygw and
// TestConformance_Garage). When the request itself fails, its error
// names the request's first key and how many it named: any of them may or
// may not be gone.
func (b *s3Backend) DeleteMany(ctx context.Context, keys []string) error {
	valid, errs, err := driver.CheckDeleteMany(ctx, keys)
	if err != nil {
		return err
	}
	for len(valid) > 0 {
		batch := valid[:min(len(valid), maxDeleteKeys)]
		valid = valid[len(batch):]
		if err := b.usable("delete objects", batch[0]); err != nil {
			return errors.Join(append(errs, err)...)
		}
		objs := make([]types.ObjectIdentifier, len(batch))
		for i := range batch {
			objs[i] = types.ObjectIdentifier{Key: &batch[i]}
		}
		in := &s3.DeleteObjectsInput{Bucket: &b.bucket, Delete: &types.Delete{Objects: objs, Quiet: aws.Bool(true)}}
		op := "delete objects"
		if len(batch) > 1 {
			op = fmt.Sprintf("delete %d objects, the first", len(batch))
		}
		var out *s3.DeleteObjectsOutput
		err := b.call(ctx, op, batch[0], false, func(ctx context.Context, ep func(*s3.Options)) (err error) {
			out, err = b.client.DeleteObjects(ctx, in, ep)
			return err
		})
		if err != nil {
			if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
				return err
			}
			errs = append(errs, err)
			continue
		}
		for _, e := range out.Errors {
			if err := b.deleteError(e); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// deleteError maps one key's failure in a DeleteObjects answer, or
// returns nil for a key that was not there.
func (b *s3Backend) deleteError(e types.Error) error {
	key, code, msg := aws.ToString(e.Key), aws.ToString(e.Code), aws.ToString(e.Message)
	where := fmt.Sprintf("s3: delete %q in bucket %q", key, b.bucket)
	switch code {
	case "NoSuchKey":
		return nil
	case "AccessDenied":
		return fmt.Errorf("%s: %s: %s: %w", where, code, msg, backend.ErrPermission)
	}
	return fmt.Errorf("%s: %s: %s", where, code, msg)
}
