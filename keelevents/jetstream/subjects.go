package jetstream

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Subjects: an event of topic "payment.refund.done" in partition 3 travels
// on "keel.ev.payment.3.refund.done", stored in stream KEEL_PAYMENT (subjects
// "keel.ev.payment.>"). The partition sits at a fixed place, right after the
// first token, so that a topic filter never mistakes it for a topic token:
// exact topic "payment" is "keel.ev.payment.*", prefix "payment.>" is
// "keel.ev.payment.*.>", and one partition of either replaces the "*" by its
// number (what ordered consumers filter on).
//
// Config.Namespace (default "keel") replaces the first subject token and
// the stream name's prefix, so that several Keel deployments can share one
// NATS cluster: namespace "shop" uses "shop.ev.payment.3.succeeded" in
// stream SHOP_PAYMENT.
type names struct {
	root         string // "keel.ev."
	streamPrefix string // "KEEL_"
}

var namespaceRE = regexp.MustCompile(`^[a-z0-9_-]{1,32}$`)

func newNames(ns string) names {
	if ns == "" {
		ns = "keel"
	}
	return names{root: ns + ".ev.", streamPrefix: strings.ToUpper(ns) + "_"}
}

var (
	topicRE    = regexp.MustCompile(`^[a-z0-9_-]+(\.[a-z0-9_-]+)*$`)
	consumerRE = regexp.MustCompile(`^[a-z0-9_-]{1,64}$`)
)

// validTopic reports whether t is a topic of the contract.
func validTopic(t string) bool { return len(t) >= 1 && len(t) <= 200 && topicRE.MatchString(t) }

// splitTopic returns the first token (the stream's prefix) and the rest.
func splitTopic(topic string) (first, rest string) {
	first, rest, _ = strings.Cut(topic, ".")
	return first, rest
}

// streamName is the stream holding every topic whose first token is first.
func (n names) streamName(first string) string { return n.streamPrefix + strings.ToUpper(first) }

// streamSubject is what the stream of first captures.
func (n names) streamSubject(first string) string { return n.root + first + ".>" }

// subject is where a message of topic in partition p is published.
func (n names) subject(topic string, p int) string {
	first, rest := splitTopic(topic)
	s := n.root + first + "." + strconv.Itoa(p)
	if rest != "" {
		s += "." + rest
	}
	return s
}

// filter is one topic pattern of a subscription: an exact topic or a prefix.
type filter struct {
	topic  string // as given: "payment.succeeded" or "payment.>"
	first  string // stream prefix
	rest   string // tokens after the first, without ".>"
	prefix bool
}

func parseFilter(s string) (filter, error) {
	f := filter{topic: s}
	t := s
	if strings.HasSuffix(s, ".>") {
		f.prefix = true
		t = strings.TrimSuffix(s, ".>")
	}
	if !validTopic(t) {
		return f, fmt.Errorf("jetstream: topic %q is not dot-separated tokens of [a-z0-9_-] (or such a prefix followed by \".>\")", s)
	}
	f.first, f.rest = splitTopic(t)
	return f, nil
}

// filterSubject is the subject of f for partition p, or every partition if p < 0.
func (n names) filterSubject(f filter, p int) string {
	part := "*"
	if p >= 0 {
		part = strconv.Itoa(p)
	}
	s := n.root + f.first + "." + part
	if f.rest != "" {
		s += "." + f.rest
	}
	if f.prefix {
		s += ".>"
	}
	return s
}

// covers reports whether every topic matched by g is matched by f.
func (f filter) covers(g filter) bool {
	if f.first != g.first {
		return false
	}
	if !f.prefix {
		return !g.prefix && f.rest == g.rest
	}
	// f = first[.rest].> covers topics strictly below first[.rest].
	base := f.rest
	if base == "" {
		return g.rest != "" || g.prefix // "payment.>" covers "payment.x", "payment.x.>" and itself, not "payment"
	}
	return strings.HasPrefix(g.rest, base+".") || (g.prefix && g.rest == base)
}

// normalizeFilters parses topics and drops those another one covers, so no
// message is delivered twice to one subscription.
func normalizeFilters(topics []string) ([]filter, error) {
	if len(topics) == 0 {
		return nil, fmt.Errorf("jetstream: a subscription needs at least one topic")
	}
	var all []filter
	for _, t := range topics {
		f, err := parseFilter(t)
		if err != nil {
			return nil, err
		}
		all = append(all, f)
	}
	var out []filter
	for i, f := range all {
		covered := false
		for j, g := range all {
			if i == j {
				continue
			}
			if g.covers(f) && (!f.covers(g) || j < i) {
				covered = true
				break
			}
		}
		if !covered {
			out = append(out, f)
		}
	}
	return out, nil
}

// durableName is the JetStream consumer of a subscription for one filter
// (and one partition when ordered): the subscription's name, then a digest
// of the filter, since a JetStream consumer on a 2.9 server has one filter
// subject and consumer names cannot hold dots.
func durableName(consumer string, f filter, partition int) string {
	sum := sha256.Sum256([]byte(f.topic))
	name := consumer + "_" + hex.EncodeToString(sum[:5])
	if partition >= 0 {
		name += "_p" + strconv.Itoa(partition)
	}
	return name
}
