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

package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/once-dev/once/internal/mcpgateway"
	"github.com/once-dev/once/test/sandbox"
)

// MCPReport is what the run's agent saw: logical tool calls made through
// the MCP gateway (bin/once-mcp over stdio, one gateway process per
// attempt), in a namespace of their own with the same tools and faults,
// while the manager is killed and the agent kills the gateway mid-call.
type MCPReport struct {
	// Calls counts logical calls (keys); Attempts every tools/call made.
	Calls    int `json:"calls"`
	Attempts int `json:"attempts"`
	// GatewayKills counts attempts whose gateway was killed (SIGKILL)
	// mid-call; the agent then retried with the same key.
	GatewayKills int `json:"gateway_kills"`
	// Answers counts the final answers by code: Committed, NeedsReview,
	// FailedFinal.
	Answers map[string]int `json:"answers"`
	// DuplicateEffects counts effects beyond the first for one key, at the
	// tool's ledger; must be 0.
	DuplicateEffects int `json:"duplicate_effects"`
	// InconsistentAnswers counts keys whose replayed call answered other
	// than the first final answer; must be 0.
	InconsistentAnswers int `json:"inconsistent_answers"`
	// WrongResults counts Committed answers whose external object id is
	// not the ledger's effect for the key, and FailedFinal answers for a
	// key with an effect; must be 0.
	WrongResults int `json:"wrong_results"`
	// Unanswered counts keys without a final answer when the run ended;
	// must be 0.
	Unanswered int `json:"unanswered"`
	// FaultsFired counts the tool's requests for these calls that the
	// sandbox's fault rules changed.
	FaultsFired int `json:"faults_fired"`
	// Issues describe each problem.
	Issues []string `json:"issues,omitempty"`
}

// problems are the MCP lane's problems, for Report.Problems.
func (m *MCPReport) problems() []string {
	if m == nil {
		return nil
	}
	var p []string
	if m.DuplicateEffects > 0 {
		p = append(p, fmt.Sprintf("%d duplicate effects of calls through the MCP gateway", m.DuplicateEffects))
	}
	if m.InconsistentAnswers > 0 {
		p = append(p, fmt.Sprintf("%d MCP calls answered a retry differently", m.InconsistentAnswers))
	}
	if m.WrongResults > 0 {
		p = append(p, fmt.Sprintf("%d MCP answers that disagree with the tool's ledger", m.WrongResults))
	}
	if m.Unanswered > 0 {
		p = append(p, fmt.Sprintf("%d MCP calls without a final answer", m.Unanswered))
	}
	return p
}

// startMCP starts the calls through the gateway, if the run makes any, and
// returns a function that waits for their report (nil without calls) at
// most the settle timeout, then stops them.
func (r *run) startMCP(ctx context.Context) func() *MCPReport {
	if r.cfg.MCPCalls <= 0 {
		return func() *MCPReport { return nil }
	}
	laneCtx, stop := context.WithCancel(ctx)
	lane := make(chan *MCPReport, 1)
	go func() { lane <- r.runMCP(laneCtx) }()
	return func() *MCPReport {
		defer stop()
		var rep *MCPReport
		select {
		case rep = <-lane:
		case <-time.After(r.cfg.SettleTimeout):
			stop()
			rep = <-lane
		}
		r.log("the calls through the MCP gateway are answered: %v", rep.Answers)
		return rep
	}
}

// mcpAnswer is the final answer to one key.
type mcpAnswer struct {
	code, externalID string
}

// runMCP makes cfg.MCPCalls logical calls through the gateway, each until
// it has a final answer (Committed, NeedsReview, FailedFinal), killing the
// gateway mid-call on some attempts, then calls once more to check that
// the answer is replayed. It returns when every call is answered or ctx
// ends.
func (r *run) runMCP(ctx context.Context) *MCPReport {
	rep := &MCPReport{Calls: r.cfg.MCPCalls, Answers: map[string]int{}}
	var mu sync.Mutex
	answers := make([]*mcpAnswer, r.cfg.MCPCalls)
	jobs := make(chan int)
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(r.cfg.Seed), uint64(w)+1))
			for i := range jobs {
				a, attempts, kills := r.mcpCall(ctx, rng, i)
				var replay *mcpAnswer
				if a != nil {
					replay, _, _ = r.mcpAttempt(ctx, i, 0)
					attempts++
				}
				mu.Lock()
				rep.Attempts += attempts
				rep.GatewayKills += kills
				answers[i] = a
				if a != nil {
					rep.Answers[a.code]++
					if replay == nil || *replay != *a {
						rep.InconsistentAnswers++
						rep.Issues = append(rep.Issues, fmt.Sprintf("call %d answered %+v, then %+v", i, *a, replay))
					}
				}
				mu.Unlock()
			}
		})
	}
	for i := range r.cfg.MCPCalls {
		select {
		case jobs <- i:
		case <-ctx.Done():
		}
	}
	close(jobs)
	wg.Wait()
	r.checkMCP(context.WithoutCancel(ctx), rep, answers)
	return rep
}

// mcpTool is the tool (of the run's three) that call i uses.
func mcpTool(i int) toolDef { return tools[i%len(tools)] }

// mcpKey is the key the agent sends with call i.
func mcpKey(i int) string { return fmt.Sprintf("call-%d", i) }

// mcpCall calls until a final answer, or ctx ends.
func (r *run) mcpCall(ctx context.Context, rng *rand.Rand, i int) (a *mcpAnswer, attempts, kills int) {
	for ctx.Err() == nil {
		var killAfter time.Duration
		// The agent's host kills the gateway mid-call on 40% of the
		// first attempts and 20% of the later ones.
		if share := 0.2 + 0.2*float64(max(0, 1-attempts)); rng.Float64() < share {
			killAfter = time.Duration(30+rng.IntN(400)) * time.Millisecond
		}
		a, killed, err := r.mcpAttempt(ctx, i, killAfter)
		attempts++
		if killed {
			kills++
		}
		if err == nil && a != nil {
			return a, attempts, kills
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
	return nil, attempts, kills
}

// mcpAttempt starts a gateway over stdio, makes call i, and kills the
// gateway after killAfter if that is positive. A nil answer with a nil
// error is an answer that is not final (Pending).
func (r *run) mcpAttempt(ctx context.Context, i int, killAfter time.Duration) (a *mcpAnswer, killed bool, err error) {
	t := mcpTool(i)
	cmd := exec.Command(filepath.Join(r.cfg.Root, "bin", "once-mcp"), "--stdio", "--namespace", r.mcpNs,
		"--kubeconfig", r.cp.Kubeconfig, "--call-timeout=20s")
	client := mcp.NewClient(&mcp.Implementation{Name: "chaos-agent", Version: "v0"}, nil)
	callCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	session, err := client.Connect(callCtx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		return nil, false, err
	}
	defer func() { _ = session.Close() }()
	var wasKilled atomic.Bool
	if killAfter > 0 {
		timer := time.AfterFunc(killAfter, func() {
			if cmd.Process != nil && cmd.Process.Kill() == nil {
				wasKilled.Store(true)
			}
		})
		defer timer.Stop()
	}
	name, _ := mcpgateway.ToolName(t.ref(), t.operation)
	var args map[string]any
	if err := json.Unmarshal(params(mcpKey(i), 100+i), &args); err != nil {
		return nil, false, err
	}
	args[mcpgateway.KeyArgument] = mcpKey(i)
	res, err := session.CallTool(callCtx, &mcp.CallToolParams{Name: name, Arguments: args})
	killed = wasKilled.Load()
	if err != nil {
		return nil, killed, err
	}
	var sc map[string]any
	b, _ := json.Marshal(res.StructuredContent)
	_ = json.Unmarshal(b, &sc)
	code, _ := sc["error"].(string)
	if !res.IsError {
		code, _ = sc["state"].(string)
	}
	id, _ := sc["externalObjectID"].(string)
	switch code {
	case "Committed", "NeedsReview", "FailedFinal":
		return &mcpAnswer{code: code, externalID: id}, killed, nil
	case "Pending":
		return nil, killed, nil
	}
	return nil, killed, fmt.Errorf("call %d: unexpected answer %s", i, b)
}

// checkMCP compares the answers with the tool's ledger.
func (r *run) checkMCP(ctx context.Context, rep *MCPReport, answers []*mcpAnswer) {
	effects, err := r.sb.Effects(ctx)
	if err != nil {
		rep.Issues = append(rep.Issues, fmt.Sprintf("reading the ledger: %v", err))
		return
	}
	byKey := map[string][]sandbox.Effect{}
	for _, e := range effects {
		if e.Action == sandbox.ActionCreate && strings.HasPrefix(e.Key, r.mcpNs+"/") {
			byKey[e.Key] = append(byKey[e.Key], e)
		}
	}
	// The gateway scopes the key to the caller: the suffix identifies it.
	for i, a := range answers {
		var mine []sandbox.Effect
		for key, es := range byKey {
			if strings.HasSuffix(key, "/"+mcpKey(i)) && strings.Contains(key, "/"+mcpTool(i).operation+"/") {
				mine = append(mine, es...)
			}
		}
		if len(mine) > 1 {
			rep.DuplicateEffects += len(mine) - 1
			rep.Issues = append(rep.Issues, fmt.Sprintf("call %d: %d effects", i, len(mine)))
		}
		switch {
		case a == nil:
			rep.Unanswered++
			rep.Issues = append(rep.Issues, fmt.Sprintf("call %d: no final answer", i))
		case a.code == "Committed" && (len(mine) == 0 || mine[0].ID != a.externalID):
			rep.WrongResults++
			rep.Issues = append(rep.Issues, fmt.Sprintf("call %d: Committed %q, ledger %v", i, a.externalID, mine))
		case a.code == "FailedFinal" && len(mine) > 0:
			rep.WrongResults++
			rep.Issues = append(rep.Issues, fmt.Sprintf("call %d: FailedFinal, but the ledger has %s", i, mine[0].ID))
		}
	}
}
