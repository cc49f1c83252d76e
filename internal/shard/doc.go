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

// Package shard splits the work of several managers by shards held through
// Leases (coordination.k8s.io/v1), so that they stop contending for the
// same objects.
//
// Every object that Once reconciles falls in one of N shards (Key). Every
// manager keeps a membership Lease, lists the live members, and computes
// the same assignment of shards to members by rendezvous hashing (Assign):
// a member that joins or leaves moves only its share. A manager then holds
// a Lease per shard assigned to it, and reconciles only the objects of the
// shards it holds (Sharder).
//
// Sharding is about throughput only. No invariant depends on it. Every
// status write is conditional on the object's resourceVersion, and every
// call is fenced by its claim. Two managers may work on one shard at the
// same moment: during a handover, with skewed clocks, or with a manager
// that froze past its Lease. That costs conflicts and repeated reads,
// never a second effect. A manager that cannot reach the API server stops renewing
// its Leases and stops reporting their shards as held when they expire by
// its own clock; the others take them over once they have expired.
package shard
