-- Argo CD health of a Once Tool (effects.once.dev).
-- Healthy when Ready is True: the definition is valid (its expressions
-- compile and the Secret keys it names exist).
-- Degraded when Stalled is True: the definition cannot be used; the
-- operations that name it wait.
-- Progressing until the Once manager has checked the current generation.
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
local ready, stalled
for _, c in ipairs(st.conditions) do
  if c.type == "Ready" then
    ready = c
  elseif c.type == "Stalled" then
    stalled = c
  end
end
if ready ~= nil and ready.status == "True" then
  hs.status = "Healthy"
  hs.message = ready.message
elseif stalled ~= nil and stalled.status == "True" then
  hs.status = "Degraded"
  hs.message = stalled.message
else
  hs.status = "Progressing"
  hs.message = "Waiting for the Once manager to check the definition"
end
return hs
