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

package v1alpha1

// MaxExpressionChars bounds the characters of the CEL expressions one
// object carries together: a Tool's or a ClusterTool's, or a Saga's
// parametersFrom with its compensations'. The manager compiles each
// expression once per generation, and the cost of compiling grows with
// the characters (docs/threat-model.md, "Bounds of every input"). The CRDs
// refuse an object over it. The manager refuses one stored before, before
// it compiles anything. Characters are Unicode code points, as the API
// server counts them.
const MaxExpressionChars = 32 * 1024
