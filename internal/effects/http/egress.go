/*
Copyright 2026.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package http

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"
)

// metadataAddresses are cloud metadata endpoints outside the link-local
// ranges: AWS's IPv6 endpoint and Alibaba Cloud's.
var metadataAddresses = []netip.Prefix{
	netip.MustParsePrefix("fd00:ec2::254/128"),
	netip.MustParsePrefix("100.100.100.200/32"),
}

// thisNetwork is 0.0.0.0/8: Linux connects 0.0.0.0 to the local host.
var thisNetwork = netip.MustParsePrefix("0.0.0.0/8")

// carriers are the IPv6 forms that reach an IPv4 address they carry, and
// the byte where it starts. An IPv4-mapped address (::ffff:0:0/96) is
// unmapped before anything else.
var carriers = []struct {
	prefix netip.Prefix
	at     int
}{
	{netip.MustParsePrefix("64:ff9b::/96"), 12},    // NAT64's well-known prefix (RFC 6052)
	{netip.MustParsePrefix("::/96"), 12},           // IPv4-compatible (RFC 4291, deprecated)
	{netip.MustParsePrefix("::ffff:0:0:0/96"), 12}, // IPv4-translated (SIIT, RFC 2765)
	{netip.MustParsePrefix("2002::/16"), 2},        // 6to4 (RFC 3056)
}

// localNAT64 is NAT64's local-use prefix (RFC 8215). Its operator chooses
// the prefix's length, and so where the IPv4 address sits: it is refused
// unless allowed.
var localNAT64 = netip.MustParsePrefix("64:ff9b:1::/48")

// ErrEgressRefused marks a call the egress policy did not let leave.
var ErrEgressRefused = errors.New("egress refused")

// Egress decides which addresses tools may be called at. It refuses, unless
// an address is in an allowed range: loopback, link-local (cloud metadata
// lives there), unspecified and multicast addresses, the known metadata
// addresses elsewhere, and the cluster's own ranges it is told of. The zero
// value refuses the built-in ranges only.
type Egress struct {
	// Refused are the cluster's ranges: service and pod CIDRs.
	Refused []netip.Prefix
	// Allowed are exceptions, checked first: 127.0.0.0/8 lets a manager
	// call a tool on its own host, as the tests and the demo do.
	Allowed []netip.Prefix
}

// Check returns an error wrapping ErrEgressRefused if ip may not be called.
func (e *Egress) Check(ip netip.Addr) error {
	ip = ip.Unmap()
	for _, p := range e.allowed() {
		if p.Contains(ip) {
			return nil
		}
	}
	if why := e.refusal(ip); why != "" {
		return fmt.Errorf("%w: %s is %s", ErrEgressRefused, ip, why)
	}
	if v4, ok := carried(ip); ok && e.refusal(v4) != "" {
		return e.Check(v4)
	}
	return nil
}

// carried returns the IPv4 address an IPv6 address reaches, if it is of a
// form that carries one.
func carried(ip netip.Addr) (netip.Addr, bool) {
	if !ip.Is6() {
		return netip.Addr{}, false
	}
	b := ip.As16()
	for _, c := range carriers {
		if c.prefix.Contains(ip) {
			return netip.AddrFrom4([4]byte(b[c.at : c.at+4])), true
		}
	}
	return netip.Addr{}, false
}

func (e *Egress) allowed() []netip.Prefix {
	if e == nil {
		return nil
	}
	return e.Allowed
}

// refusal says why ip is refused, or "".
func (e *Egress) refusal(ip netip.Addr) string {
	switch {
	case ip.IsLoopback():
		return "a loopback address"
	case ip.IsLinkLocalUnicast(), ip.IsLinkLocalMulticast():
		return "a link-local address (cloud metadata)"
	case ip.IsUnspecified(), thisNetwork.Contains(ip):
		return "an unspecified address"
	case ip.IsMulticast():
		return "a multicast address"
	case localNAT64.Contains(ip):
		return "a local-use NAT64 address, whose IPv4 address cannot be told"
	}
	for _, p := range metadataAddresses {
		if p.Contains(ip) {
			return "a cloud metadata address"
		}
	}
	if e != nil {
		for _, p := range e.Refused {
			if p.Contains(ip) {
				return "in the cluster's range " + p.String()
			}
		}
	}
	return ""
}

// CheckURL reports what is wrong with a URL before anything is sent to it
// (a tool's, a subscriber's): user information (credentials) in it, or a
// host that is a literal address the policy refuses. Host names are
// checked when they are dialled.
func (e *Egress) CheckURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return redact(err)
	}
	if u.User != nil {
		return errors.New("credentials in the URL are refused")
	}
	ip, err := netip.ParseAddr(u.Hostname())
	if err != nil {
		// A host name: its addresses are checked when they are dialled.
		return nil
	}
	return e.Check(ip)
}

// control is a net.Dialer Control function: it runs on the address actually
// dialled, after name resolution, so a name that resolves to a refused
// address (DNS rebinding included) is refused too.
func (e *Egress) control(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: cannot tell the address of %s %s: %v", ErrEgressRefused, network, address, err)
	}
	return e.Check(ap.Addr())
}

// ParseCIDRs parses a comma-separated list of CIDRs, as flags give them.
func ParseCIDRs(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		p, err := netip.ParsePrefix(f)
		if err != nil {
			return nil, err
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// dialer is the dialer of effect calls under e, with net/http's defaults
// otherwise.
func (e *Egress) dialer() *net.Dialer {
	return &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second, Control: e.control}
}
