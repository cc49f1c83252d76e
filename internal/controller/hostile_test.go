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

package controller

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/once-dev/once/api/v1alpha1"
)

var _ = Describe("A hostile or careless tool", func() {
	var ns string
	BeforeEach(func() {
		ns = newNamespace()
		DeferCleanup(startManager(managerOptions{}))
	})

	// toolCondition reads a condition of a Tool.
	toolCondition := func(name, typ string) func() metav1.Condition {
		return func() metav1.Condition {
			t := &v1.Tool{}
			Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, t)).To(Succeed())
			if c := meta.FindStatusCondition(t.Status.Conditions, typ); c != nil {
				return *c
			}
			return metav1.Condition{}
		}
	}

	It("never gets a secret header value into status or events, even when it echoes it", func() {
		const secret = "Bearer echo-me-if-you-can"
		echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			auth := r.Header.Get("Authorization")
			w.Header().Set("X-Echo", auth)
			if strings.HasPrefix(r.URL.Path, "/fail") {
				w.WriteHeader(http.StatusForbidden)
				_, _ = fmt.Fprintf(w, "forbidden: %v", r.Header)
				return
			}
			w.WriteHeader(http.StatusCreated)
			_, _ = fmt.Fprintf(w, `{"id":%q,"b64":%q,"headers":%q}`, auth,
				base64.StdEncoding.EncodeToString([]byte(auth)), fmt.Sprint(r.Header))
		}))
		DeferCleanup(echo.Close)
		Expect(k8sClient.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "token"},
			StringData: map[string]string{"token": secret}})).To(Succeed())
		newTool(ns, "echo", v1.IdempotencyNone, func(s *v1.ToolSpec) {
			s.HTTP.URL = echo.URL
			s.HTTP.Headers = []v1.HTTPHeader{{Name: "Authorization", ValueFrom: &v1.HeaderSource{
				SecretKeyRef: v1.SecretKeySelector{Name: "token", Key: "token"}}}}
			s.Operations[0].Path = "/ok"
			s.Operations[0].Response.ExternalRequestID = "response.headers['x-echo']"
			s.Operations = append(s.Operations, v1.ToolOperation{Name: "charge.fail", Path: "/fail"})
		})
		create(newOp(ns, "ok", "echo", map[string]any{"amount": 1}))
		failing := newOp(ns, "fail", "echo", map[string]any{"amount": 1})
		failing.Spec.Operation = "charge.fail"
		create(failing)

		ok := waitFor(ns, "ok", v1.StateCommitted)
		fail := waitFor(ns, "fail", v1.StateFailedFinal)
		Expect(ok.Status.ExternalObjectID).To(Equal("[redacted]"), "the id the tool echoed is scrubbed")
		Expect(fail.Status.ErrorMessage).To(ContainSubstring("[redacted]"), "the error the tool echoed is scrubbed")
		for _, op := range []*v1.SideEffectOperation{ok, fail} {
			Expect(describe(op)).NotTo(ContainSubstring("echo-me-if-you-can"))
			Expect(describe(op)).NotTo(ContainSubstring(base64.StdEncoding.EncodeToString([]byte(secret))))
		}
		var events corev1.EventList
		Expect(k8sClient.List(ctx, &events, client.InNamespace(ns))).To(Succeed())
		Expect(events.Items).NotTo(BeEmpty())
		for _, e := range events.Items {
			Expect(e.Message).NotTo(ContainSubstring("echo-me-if-you-can"))
		}
	})

	It("may not write a regular expression that runs past the limits, and the tool says why", func() {
		// A matches() runs to its end, past the cost limit and the time
		// limit: on a 64 KiB answer this one took seconds per call.
		newTool(ns, "regex", v1.IdempotencyNone, func(s *v1.ToolSpec) {
			s.Operations[0].Response.Outcomes = []v1.OutcomeRule{
				{When: "response.body.text.matches('((a{1,10}){1,10}){1,10}b')", Outcome: v1.OutcomePermanent},
				{When: "response.body.text.matches(response.body.pattern)", Outcome: v1.OutcomePermanent},
			}
		})
		Eventually(toolCondition("regex", v1.ConditionStalled), 30*time.Second).Should(And(
			HaveField("Status", metav1.ConditionTrue),
			HaveField("Message", ContainSubstring("response.outcomes[0].when")),
			HaveField("Message", ContainSubstring("compiles to 2222 instructions, more than the limit of 128")),
			HaveField("Message", ContainSubstring("response.outcomes[1].when")),
			HaveField("Message", ContainSubstring("the pattern of matches() must be a string literal"))))
		Expect(toolCondition("regex", v1.ConditionReady)()).To(HaveField("Status", metav1.ConditionFalse))
	})

	It("is not called at the cloud metadata address, and the tool says why", func() {
		newTool(ns, "metadata", v1.IdempotencyNone, func(s *v1.ToolSpec) {
			s.HTTP.URL = "http://169.254.169.254/latest"
		})
		Eventually(toolCondition("metadata", v1.ConditionStalled)).Should(And(
			HaveField("Status", metav1.ConditionTrue),
			HaveField("Message", ContainSubstring("169.254.169.254 is a link-local address (cloud metadata)"))))
		Expect(toolCondition("metadata", v1.ConditionReady)()).To(HaveField("Status", metav1.ConditionFalse))

		create(newOp(ns, "op", "metadata", map[string]any{}))
		Eventually(func() metav1.Condition { return condition(get(ns, "op"), v1.ConditionStalled) }).Should(And(
			HaveField("Reason", v1.ReasonToolInvalid), HaveField("Message", ContainSubstring("egress refused"))))
		Expect(get(ns, "op").Status.Attempts).To(BeZero())
	})

	It("says which expression costs too much", func() {
		newTool(ns, "costly", v1.IdempotencyNone, func(s *v1.ToolSpec) {
			s.Operations[0].Response.Result = "response.body.items.map(x, response.body.items.map(y, x + y))"
		})
		Eventually(toolCondition("costly", v1.ConditionReady)).Should(And(
			HaveField("Status", metav1.ConditionFalse),
			HaveField("Message", And(ContainSubstring("spec.operations[0].response.result"),
				ContainSubstring("more than the limit")))))
	})

	It("cannot put credentials in its URL, checked by the API server", func() {
		for _, url := range []string{"https://user:pass@payments.example.com", "http://token@10.0.0.1:8080/v1"} {
			t := &v1.Tool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "creds"}, Spec: v1.ToolSpec{
				HTTP:        v1.HTTPBackend{URL: url},
				Idempotency: v1.ToolIdempotency{Mode: v1.IdempotencyNone},
				Operations:  []v1.ToolOperation{{Name: "x", Path: "/x"}},
			}}
			err := k8sClient.Create(ctx, t)
			Expect(err).To(HaveOccurred(), url)
			Expect(err.Error()).To(ContainSubstring("url must not hold credentials"))
		}
		t := &v1.Tool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fine"}, Spec: v1.ToolSpec{
			HTTP:        v1.HTTPBackend{URL: "https://payments.example.com/v1?user=a@b"},
			Idempotency: v1.ToolIdempotency{Mode: v1.IdempotencyNone},
			Operations:  []v1.ToolOperation{{Name: "x", Path: "/x"}},
		}}
		Expect(k8sClient.Create(ctx, t)).To(Succeed(), "an @ after the host is no credential")
	})

	It("names exactly one way to authenticate, and a token URL that is a URL, checked by the API server", func() {
		tool := func(name string, auth *v1.HTTPAuth) *v1.Tool {
			return &v1.Tool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: v1.ToolSpec{
				HTTP:        v1.HTTPBackend{URL: "https://api.example.com", Auth: auth},
				Idempotency: v1.ToolIdempotency{Mode: v1.IdempotencyNone},
				Operations:  []v1.ToolOperation{{Name: "x", Path: "/x"}},
			}}
		}
		err := k8sClient.Create(ctx, tool("two", &v1.HTTPAuth{
			Bearer: &v1.SecretKeySelector{Name: "t", Key: "token"}, Basic: &v1.BasicAuth{SecretName: "b"}}))
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("auth needs exactly one of bearer, basic and oauth2"))
		err = k8sClient.Create(ctx, tool("none", &v1.HTTPAuth{}))
		Expect(err).To(HaveOccurred())
		err = k8sClient.Create(ctx, tool("badurl", &v1.HTTPAuth{
			OAuth2: &v1.OAuth2ClientCredentials{TokenURL: "ftp://auth.example.com/token", SecretName: "o"}}))
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("tokenURL must be an http or https URL"))
		Expect(k8sClient.Create(ctx, tool("oauth", &v1.HTTPAuth{
			OAuth2: &v1.OAuth2ClientCredentials{TokenURL: "https://auth.example.com/oauth/token", SecretName: "o",
				Scopes: []string{"charges:write"}}}))).To(Succeed())
	})

	It("sends its client secret only to an https token URL without credentials, checked by the API server", func() {
		oauth := func(name, url string) *v1.Tool {
			return &v1.Tool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: v1.ToolSpec{
				HTTP: v1.HTTPBackend{URL: "https://api.example.com", Auth: &v1.HTTPAuth{
					OAuth2: &v1.OAuth2ClientCredentials{TokenURL: url, SecretName: "o"}}},
				Idempotency: v1.ToolIdempotency{Mode: v1.IdempotencyNone},
				Operations:  []v1.ToolOperation{{Name: "x", Path: "/x"}},
			}}
		}
		for url, refusal := range map[string]string{
			"http://auth.example.com/oauth/token":          "tokenURL must be https",
			"http://10.0.0.7:8080/token":                   "tokenURL must be https",
			"http://127.0.0.1.example.com/token":           "tokenURL must be https",
			"https://client:secret@auth.example.com/token": "tokenURL must not hold credentials",
			"http://user@127.0.0.1:9000/token":             "tokenURL must not hold credentials",
		} {
			err := k8sClient.Create(ctx, oauth("refused", url))
			Expect(err).To(HaveOccurred(), url)
			Expect(err.Error()).To(ContainSubstring(refusal), url)
		}
		for i, url := range []string{"https://auth.example.com/token?for=a@b", "http://127.0.0.1:9000/token",
			"http://localhost:9000/token", "http://[::1]:9000/token"} {
			Expect(k8sClient.Create(ctx, oauth(fmt.Sprintf("fine-%d", i), url))).To(Succeed(), url)
		}
	})
})
