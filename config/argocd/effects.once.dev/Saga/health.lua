-- Argo CD health of a Once Saga (effects.once.dev).
-- Healthy when Ready is True: every step committed.
-- Suspended while a step waits for an approval in spec.approvals, or
-- while its next move waits for a person to lift spec.suspend (Ready's
-- reason Suspended).
-- Degraded when Stalled is True otherwise: failed before any effect
-- (FailedFinal), failed and undone (Compensated: what the saga was
-- applied for did not happen), or waiting for a person's decision
-- (NeedsReview).
-- Progressing otherwise, and while the status describes an older
-- generation than the spec.
local hs = {}
local st = obj.status
if st == nil or st.conditions == nil then
  hs.status = "Progressing"
  hs.message = "Waiting for the Once manager"
  return hs
end
local generation = obj.metadata.generation or 0
if (st.observedGeneration or 0) < generation then
  hs.status = "Progressing"
  hs.message = "Waiting for the Once manager to observe generation " .. generation
  return hs
end
local ready, stalled, reconciling
for _, c in ipairs(st.conditions) do
  if c.type == "Ready" then
    ready = c
  elseif c.type == "Stalled" then
    stalled = c
  elseif c.type == "Reconciling" then
    reconciling = c
  end
end
local state = st.state or "Planned"
local function say(c)
  if c ~= nil and c.message ~= nil and c.message ~= "" then
    return state .. ": " .. c.message
  end
  return state
end
if ready ~= nil and ready.status == "True" then
  hs.status = "Healthy"
  hs.message = say(ready)
elseif stalled ~= nil and stalled.status == "True" and stalled.reason == "WaitingForApproval" then
  hs.status = "Suspended"
  hs.message = say(stalled)
elseif stalled ~= nil and stalled.status == "True" then
  hs.status = "Degraded"
  hs.message = say(stalled)
elseif ready ~= nil and ready.reason == "Suspended" then
  hs.status = "Suspended"
  hs.message = say(ready)
else
  hs.status = "Progressing"
  hs.message = say(reconciling or ready)
end
return hs
