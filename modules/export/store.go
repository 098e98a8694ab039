package export

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"gocloud.dev/blob"
	"gocloud.dev/blob/fileblob"
	"gocloud.dev/blob/s3blob"
	"gocloud.dev/gcerrors"
)

// openBucket opens the store the settings name: a directory through
// fileblob (the default: embedded, nothing to install) or any S3-compatible
// service through s3blob (path-style addressing, so MinIO, SeaweedFS and
// the like work as well as AWS).
func openBucket(ctx context.Context, s settings) (*blob.Bucket, error) {
	switch s.storage {
	case "s3":
		return OpenS3(ctx, S3Config{Endpoint: s.s3Endpoint, Bucket: s.s3Bucket, Region: s.s3Region, AccessKey: s.s3Key, SecretKey: s.s3Secret})
	default:
		if err := os.MkdirAll(s.dir, 0o750); err != nil {
			return nil, err
		}
		// NoTempDir: the temporary file sits beside its object, so the
		// final rename never crosses a mount point.
		return fileblob.OpenBucket(s.dir, &fileblob.Options{CreateDir: true, NoTempDir: true})
	}
}

// S3Config names an S3-compatible bucket.
type S3Config struct {
	Endpoint, Bucket, Region, AccessKey, SecretKey string
}

// OpenS3 opens an S3-compatible bucket with static credentials.
func OpenS3(ctx context.Context, c S3Config) (*blob.Bucket, error) {
	o := s3.Options{Region: c.Region, UsePathStyle: true}
	if c.Endpoint != "" {
		o.BaseEndpoint = aws.String(c.Endpoint)
	}
	if c.AccessKey != "" {
		o.Credentials = credentials.NewStaticCredentialsProvider(c.AccessKey, c.SecretKey, "")
	}
	client := s3.New(o)
	b, err := s3blob.OpenBucket(ctx, client, c.Bucket, nil)
	if err != nil {
		return nil, fmt.Errorf("opening s3 bucket %s: %w", c.Bucket, err)
	}
	return b, nil
}

// lookup reads a key's attributes: (nil, nil) when it is absent.
func lookup(ctx context.Context, b *blob.Bucket, key string) (*blob.Attributes, error) {
	a, err := b.Attributes(ctx, key)
	if err != nil {
		if gcerrors.Code(err) == gcerrors.NotFound {
			return nil, nil
		}
		return nil, fmt.Errorf("looking up %s: %w", key, err)
	}
	return a, nil
}

var errQuarantine = errors.New("object at a stable key does not match: quarantined")

// Stable object keys: a part is named by (task, data version, shard,
// chunk), the final object by (task, merge generation), so every attempt of
// the same intent writes — and looks up — the same key.
func partKey(task, version int64, shard, chunk int) string {
	return fmt.Sprintf("parts/t%d/v%d/s%05d/c%05d.csv", task, version, shard, chunk)
}

func finalKey(task int64, gen int, format string, gz bool) string {
	ext := format
	if gz {
		ext += ".gz"
	}
	return fmt.Sprintf("exports/t%d/g%d/export-%d.%s", task, gen, task, ext)
}
