// testcontainers-go's Kafka module (the Confluent-style contract) against sluice's image:
// produce, consume, and a consumer group that commits, with franz-go.
package tc

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/testcontainers/testcontainers-go/modules/kafka"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func TestKafkaModuleAgainstSluice(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	image := os.Getenv("SLUICE_IMAGE")
	if image == "" {
		image = "localhost/sluice:latest"
	}
	container, err := kafka.Run(ctx, image)
	if container != nil {
		defer func() { _ = container.Terminate(context.Background()) }()
	}
	if err != nil {
		t.Fatalf("kafka.Run: %v", err)
	}
	brokers, err := container.Brokers(ctx)
	if err != nil {
		t.Fatalf("brokers: %v", err)
	}
	admin, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	adm := kadm.NewClient(admin)
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, "events"); err != nil {
		t.Fatalf("create topic: %v", err)
	}
	for i := 0; i < 20; i++ {
		r := &kgo.Record{Topic: "events", Value: []byte{byte('a' + i)}}
		if err := admin.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
	consumer, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumerGroup("audit"),
		kgo.ConsumeTopics("events"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit())
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	seen := map[byte]bool{}
	for len(seen) < 20 && ctx.Err() == nil {
		fetches := consumer.PollFetches(ctx)
		fetches.EachRecord(func(r *kgo.Record) { seen[r.Value[0]] = true })
		if err := consumer.CommitUncommittedOffsets(ctx); err != nil {
			t.Fatalf("commit: %v", err)
		}
	}
	if len(seen) != 20 {
		t.Fatalf("read %d of 20 records", len(seen))
	}
	offsets, err := adm.FetchOffsets(ctx, "audit")
	if err != nil {
		t.Fatalf("fetch offsets: %v", err)
	}
	var committed int64
	offsets.Each(func(o kadm.OffsetResponse) { committed += o.At })
	if committed != 20 {
		t.Fatalf("committed %d, want 20", committed)
	}
}
