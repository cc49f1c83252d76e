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

// Package argocd runs Once's Argo CD health checks (config/argocd) the way
// Argo CD runs a resource customization: a Lua script, given the live
// object as the global obj, returns a table whose status and message are
// the resource's health. Tests use it to check the scripts against objects
// the real controller produced.
package argocd

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	lua "github.com/yuin/gopher-lua"
	"sigs.k8s.io/yaml"
)

// Health statuses a script may return, as Argo CD names them.
const (
	Healthy     = "Healthy"
	Progressing = "Progressing"
	Degraded    = "Degraded"
	Suspended   = "Suspended"
	Missing     = "Missing"
	Unknown     = "Unknown"
)

// Group is the API group of Once's kinds.
const Group = "effects.once.dev"

// Kinds are the kinds that have a health check.
var Kinds = []string{"SideEffectOperation", "Saga", "Tool", "ClusterTool"}

// ConfigMapKeyPrefix starts each health check's key in argocd-cm, followed
// by "<group>_<kind>".
const ConfigMapKeyPrefix = "resource.customizations.health."

// Health is what a script returned.
type Health struct {
	Status  string
	Message string
}

// ScriptPath is where a kind's check lives under the repository root, in
// the layout of Argo CD's own resource_customizations.
func ScriptPath(root, kind string) string {
	return filepath.Join(root, "config", "argocd", Group, kind, "health.lua")
}

// ConfigMapPatchPath is the argocd-cm patch under the repository root.
func ConfigMapPatchPath(root string) string {
	return filepath.Join(root, "config", "argocd", "argocd-cm-patch.yaml")
}

// LoadScript reads a kind's check.
func LoadScript(root, kind string) (string, error) {
	b, err := os.ReadFile(ScriptPath(root, kind))
	if err != nil {
		return "", fmt.Errorf("reading the health check of %s: %w", kind, err)
	}
	return string(b), nil
}

// LoadConfigMapData reads the data of the argocd-cm patch.
func LoadConfigMapData(root string) (map[string]string, error) {
	b, err := os.ReadFile(ConfigMapPatchPath(root))
	if err != nil {
		return nil, fmt.Errorf("reading the argocd-cm patch: %w", err)
	}
	var cm struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name      string            `json:"name"`
			Namespace string            `json:"namespace"`
			Labels    map[string]string `json:"labels"`
		} `json:"metadata"`
		Data map[string]string `json:"data"`
	}
	if err := yaml.UnmarshalStrict(b, &cm); err != nil {
		return nil, fmt.Errorf("parsing the argocd-cm patch: %w", err)
	}
	if cm.APIVersion != "v1" || cm.Kind != "ConfigMap" || cm.Metadata.Name != "argocd-cm" {
		return nil, fmt.Errorf("the argocd-cm patch is a %s %s named %q, want a v1 ConfigMap named argocd-cm",
			cm.APIVersion, cm.Kind, cm.Metadata.Name)
	}
	return cm.Data, nil
}

// RenderConfigMapPatch renders the argocd-cm patch from the scripts, as
// config/argocd/argocd-cm-patch.yaml holds it.
func RenderConfigMapPatch(root string) (string, error) {
	var b strings.Builder
	b.WriteString(configMapPatchHeader)
	for _, kind := range Kinds {
		script, err := LoadScript(root, kind)
		if err != nil {
			return "", err
		}
		b.WriteString("  " + ConfigMapKey(kind) + ": |\n")
		for line := range strings.Lines(script) {
			if strings.TrimSpace(line) != "" {
				b.WriteString("    ")
			}
			b.WriteString(line)
		}
	}
	return b.String(), nil
}

const configMapPatchHeader = `# Argo CD health checks for Once's kinds, as argocd-cm entries.
# Merge into the argocd-cm ConfigMap of your Argo CD installation:
#   kubectl -n argocd patch configmap argocd-cm --patch-file config/argocd/argocd-cm-patch.yaml
# Each value is the file config/argocd/effects.once.dev/<Kind>/health.lua.
# Edit those, then regenerate this file: go test ./test/argocd -update
apiVersion: v1
kind: ConfigMap
metadata:
  name: argocd-cm
  namespace: argocd
  labels:
    app.kubernetes.io/name: argocd-cm
    app.kubernetes.io/part-of: argocd
data:
`

// ConfigMapKey is the argocd-cm key of a kind's health check.
func ConfigMapKey(kind string) string {
	return ConfigMapKeyPrefix + Group + "_" + kind
}

// Run runs a health check over an object (as unstructured content) in the
// environment Argo CD gives a health check from argocd-cm, bounded in time.
//
// That environment is Argo CD v3.5.1's (commit 109ca7ca7113, util/lua/lua.go,
// runLuaWithResourceActionParameters, and util/lua/oslib_safe.go): the
// package, base and table libraries and nothing else of Lua's, unless the
// argocd-cm sets useOpenLibs for the kind, which Once's patch does not. So
// no string, math, os or io global: a script that calls string.format
// fails in Argo CD, and must fail here. Argo CD's own "safe os" library
// registers time and date under the table library's name, which is loaded
// already, so it adds nothing: the two are reachable only through
// require("os"). It also sets the global actionParams (empty for a health
// check). Run gives the same names; its time and date are its own,
// simpler ones.
func Run(script string, obj map[string]any) (Health, error) {
	L := lua.NewState(lua.Options{SkipOpenLibs: true})
	defer L.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	L.SetContext(ctx)
	for _, lib := range []struct {
		name string
		open lua.LGFunction
	}{
		{lua.LoadLibName, lua.OpenPackage},
		{lua.BaseLibName, lua.OpenBase},
		{lua.TabLibName, lua.OpenTable},
	} {
		if err := L.CallByParam(lua.P{Fn: L.NewFunction(lib.open), NRet: 0, Protect: true},
			lua.LString(lib.name)); err != nil {
			return Health{}, fmt.Errorf("opening %s: %w", lib.name, err)
		}
	}
	L.PreloadModule(lua.OsLibName, func(L *lua.LState) int {
		L.Push(L.SetFuncs(L.NewTable(), timeFuncs))
		return 1
	})
	L.SetGlobal("actionParams", L.NewTable())
	L.SetGlobal("obj", toLua(L, obj))
	if err := L.DoString(script); err != nil {
		return Health{}, fmt.Errorf("running the health check: %w", err)
	}
	tbl, ok := L.Get(-1).(*lua.LTable)
	if !ok {
		return Health{}, fmt.Errorf("the health check returned %s, want a table", L.Get(-1).Type())
	}
	h := Health{Status: lua.LVAsString(tbl.RawGetString("status")), Message: lua.LVAsString(tbl.RawGetString("message"))}
	// Argo CD shows a status it does not know as Unknown, "Lua returned an
	// invalid health status": a test should fail on it instead.
	if !slices.Contains([]string{Healthy, Progressing, Degraded, Suspended, Missing, Unknown}, h.Status) {
		return h, fmt.Errorf("the health check returned status %q, which Argo CD does not know", h.Status)
	}
	return h, nil
}

// timeFuncs are the two functions of the os library Argo CD lets a script
// use: time() in seconds since the epoch, and date(format) with %Y, %m,
// %d, %H, %M and %S, in UTC when the format starts with "!".
var timeFuncs = map[string]lua.LGFunction{
	"time": func(L *lua.LState) int {
		L.Push(lua.LNumber(time.Now().Unix()))
		return 1
	},
	"date": func(L *lua.LState) int {
		format, now := L.OptString(1, "%Y-%m-%d %H:%M:%S"), time.Now()
		if f, ok := strings.CutPrefix(format, "!"); ok {
			format, now = f, now.UTC()
		}
		layout := strings.NewReplacer("%Y", "2006", "%m", "01", "%d", "02", "%H", "15", "%M", "04", "%S", "05").
			Replace(format)
		L.Push(lua.LString(now.Format(layout)))
		return 1
	},
}

// toLua converts unstructured content to Lua values as Argo CD does:
// objects and arrays become tables (arrays indexed from 1), numbers
// numbers, and null nil.
func toLua(L *lua.LState, v any) lua.LValue {
	switch v := v.(type) {
	case nil:
		return lua.LNil
	case bool:
		return lua.LBool(v)
	case string:
		return lua.LString(v)
	case int64:
		return lua.LNumber(v)
	case int32:
		return lua.LNumber(v)
	case int:
		return lua.LNumber(v)
	case float64:
		return lua.LNumber(v)
	case map[string]any:
		t := L.NewTable()
		for k, e := range v {
			t.RawSetString(k, toLua(L, e))
		}
		return t
	case []any:
		t := L.NewTable()
		for _, e := range v {
			t.Append(toLua(L, e))
		}
		return t
	default:
		// Unstructured content holds only the types above.
		return lua.LString(strings.TrimSpace(fmt.Sprint(v)))
	}
}
