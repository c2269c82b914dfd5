-- The rate-limit state one API key shares across instances (src/rate/redis.rs), in one hash.
-- Every instant is on this Redis server's clock, in milliseconds: instances send durations
-- ("ends in 9500 ms"), never their own clock's time, so that hosts need not agree on the time.
--
-- KEYS[1]  the key's hash; each quiet told is published, in ms, on the channel KEYS[1]..':quiet'
-- ARGV[1]  'admit' (apply the reports and the outcome, then spend one request or say how long
--          to hold it)
--          or 'report' (apply the reports and the outcome only)
-- ARGV[2]  '1' to spend from the window budgets, '0' to obey only the cooldown
-- ARGV[3]  how long one instance may probe an unknown period, ms
-- ARGV[4]  what the reported response asked: '' nothing, 'ok' no quiet, or quiet for N ms
-- ARGV[5]  the highest admission number this instance was given for the state ('1' if it saw
--          the state and was given none, '0' if it never saw it), and ':<ms>' how long ago its
--          last request was admitted, if one was
-- ARGV[6]  how many requests the instance asks for at once, this one included (absent: 1); more
--          than one asks for a lease (below)
-- ARGV[7]  how long a lease may be spent, ms
-- ARGV[8]  leases given back: '<requests>@<first admission>:<period>:<period>...' each,
--          separated by spaces
-- ARGV[9]  the requests this instance sent without an admission here (while Redis did not
--          answer it), as '<ms ago they were answered>:<requests>' each, separated by spaces:
--          spent from every window whose opener was sent no later than they were answered
-- ARGV[10..] the windows reported, six values each: limit, remaining, period (the service's
--          reset, unix seconds), ms until the period ends, the admission number of the
--          request answered (0 if it was not admitted here), and how many ms ago it was sent
--
-- A lease saves the round trip per request: the instance spends it on its own until it is spent
-- or over. It is taken off every open window at once, like as many admissions, so the fleet
-- never spends more than the windows hold. It is granted only while the state is known and no
-- quiet holds, lasts at most ARGV[7] (the longest an instance spending it may stay unaware of a
-- quiet another instance met) and never past the first window's end, is sized down with the
-- time left before that end, and takes at most a LEASE_SHARE-th of what the leanest window has
-- left, so that a fleet's leases leave little unspent when a window ends. What an instance did
-- not spend comes back when the lease ends, to the windows it was taken from that are still
-- open (never to a state lost since); until then a window spent on leases holds the others
-- only briefly at a time.
--
-- A report says what the service had left when that request arrived. When it opens a window
-- (a period not known yet: a new one, or one of a window the headers did not show before), the
-- requests admitted after it are taken off, since they went out after it and may not be
-- counted yet. A window already open counts every admission itself, and a report only ever
-- lowers it (spending the store did not see: an instance while Redis was down, a client
-- without it). A request admitted before the one that opened the window, or by a state lost
-- since, can still reach the service after it (the replies of a slow Redis come back 50 to
-- 300 ms apart): its answer, with less left than the opener's, is the window's to spend too.
--
-- Windows are told apart by their period, never by their limit: a minute and a day may share
-- one, and a service may report another limit with each answer. At most MAX_WINDOWS are kept,
-- and a window is removed once its period has ended.
--
-- Fields: 'seq' (admissions so far), 'base' (the number admissions started from after the
-- state was last lost, unset before), 'cool' (quiet until), 'half' (a quiet was asked and no
-- normal answer came since), 'probe' (an instance probes until), 'fresh' (until when the
-- instances a state lost while admitting admitted are told so), 'gone' =
-- '<period>:<resolved>' (the latest period that ended here: a late report of it or of an
-- earlier one cannot bring it back, and it is resolved, no longer unknown, once a later period
-- of any window is reported), and 'p:<period>' = '<limit>:<left>:<ends>:<leased>:<by>:<at>'
-- for each window (leased: when the last lease taken from it ends; by and at: the admission
-- whose report opened it, and what that report had left; opened: when that admission's
-- request was sent).
--
-- Returns {verdict, n, seq}: {0, 0, seq} go, {0, 1, seq} go as the probe, {0, 2, seq} go as the
-- probe of a state this instance saw and Redis lost or rolled back, {0, 3, seq} go and {0, 4,
-- seq} go as the probe, the state that admitted this instance's requests lost since while it
-- admitted others (seq: the admission number), {1, ms} hold
-- for the cooldown,
-- {2, ms} hold while another instance probes, {3, ms, limit, ends, period} hold until a spent
-- window ends (its limit, ms until its period ends, and the period: what each instance keeps
-- of the fleet's window, to share its periods out should the state be lost).
-- Asked for more than one request, a go is {0, probe, first, granted, ms, last, period...}:
-- admissions first to first + granted - 1 (this request and a lease of the rest), to be spent
-- within ms, taken from the windows of the periods listed, the last of which ends in last ms.

local key = KEYS[1]
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
-- After a loss, admissions are numbered from this server's time in microseconds (past the
-- highest number the instance that found it was given): fewer than one admission a
-- microsecond keeps every number below the time it was given, so the numbers a lost state gave
-- are below the new state's, whoever finds the loss, and no instance takes the new state for a
-- rolled-back one.
local now_us = tonumber(time[1]) * 1000000 + tonumber(time[2])

-- Every number comes from the service through an instance, and may be anything. Lua numbers
-- are doubles, and '%d' of one at or above 2^63 writes -9223372036854775808: each number is
-- clamped first to an integer a double holds exactly. A budget that large is never spent; a
-- span is at most a year, after which the state is found out again.
local MOST = 2 ^ 53
local YEAR = 366 * 86400 * 1000
-- The specification has two windows.
local MAX_WINDOWS = 4
-- A lease takes at most this share of what is left (1 / LEASE_SHARE), and one request at least.
local LEASE_SHARE = 16
-- A state found lost by an instance admitted within this many ms was admitting requests, some
-- still on the wire and counted by no window: for as long, each instance admitted by it is
-- told, and counts the others itself (LOST_SINCE_FOR in store.rs).
local LOST_SINCE = 2000

-- `value` as an integer from `low` to `high`; what is not a number reads as `low`.
local function clamp(value, low, high)
  local n = tonumber(value)
  if n == nil or n ~= n then
    return low
  end
  return math.max(low, math.min(high, math.floor(n)))
end

local seq, base, cool, half, probe, fresh = 0, 0, 0, 0, 0, 0
local gone, resolved = 0, true
local windows = {}
local fields = redis.call('HGETALL', key)
-- A state the instance has seen and Redis no longer holds was lost (evicted, flushed, a restart
-- without persistence, a failover to a replica that lagged, or expired while unused): what it
-- held, a cooldown or a spent budget, is unknown, never a fresh budget. As after a quiet, one
-- request probes and the others wait for its answer, whether the budgets are spent or not.
local seen_number, admitted_ago = string.match(ARGV[5] or '', '^(%d+):?(%d*)$')
local seen = clamp(seen_number, 0, MOST)
for i = 14, #ARGV, 6 do
  seen = math.max(seen, clamp(ARGV[i], 0, MOST))
end
local lost = #fields == 0 and seen > 0
for i = 1, #fields, 2 do
  local field, value = fields[i], fields[i + 1]
  if field == 'seq' then
    seq = clamp(value, 0, MOST)
  elseif field == 'base' then
    base = clamp(value, 0, MOST)
  elseif field == 'cool' then
    cool = clamp(value, 0, MOST)
  elseif field == 'half' then
    half = clamp(value, 0, 1)
  elseif field == 'probe' then
    probe = clamp(value, 0, MOST)
  elseif field == 'fresh' then
    fresh = clamp(value, 0, MOST)
  elseif field == 'gone' then
    local period, done = string.match(value, '^(%d+):([01])$')
    if period then
      gone, resolved = tonumber(period), done == '1'
    end
  else
    -- What cannot be read is left out: with no window open, the state is unknown.
    local period = string.match(field, '^p:(%d+)$')
    local limit, left, ends, leased, by, at, opened =
      string.match(value, '^(%d+):(%-?%d+):(%d+):?(%d*):?(%d*):?(%d*):?(%d*)$')
    if period and limit then
      windows[#windows + 1] = {
        period = tonumber(period), limit = tonumber(limit), left = tonumber(left),
        ends = tonumber(ends), leased = tonumber(leased) or 0, by = tonumber(by) or 0,
        at = tonumber(at) or 0, opened = tonumber(opened) or 0,
      }
    end
  end
end

-- A window whose period has ended goes, and the state is unknown until a later period is
-- reported: the headers show only the window that binds.
local open = {}
for _, w in ipairs(windows) do
  if w.ends > now then
    open[#open + 1] = w
  else
    gone, resolved = math.max(gone, w.period), false
  end
end
windows = open

-- A state that counts fewer admissions than one an instance was given, or a report answers,
-- lost those after its copy was taken: a failover to a replica that lagged, or a restart from an
-- older snapshot. Its windows count them as still left: it reads as lost. (A state opened anew
-- by an instance that saw none reads so too, to the others: a probe already out still goes
-- alone.)
if seq < seen and #fields > 0 then
  lost, windows = true, {}
end
if lost then
  half = 1
  base = math.min(math.max(seen + 1, now_us), MOST)
  seq = math.max(seq, base)
  if admitted_ago ~= nil and admitted_ago ~= '' and tonumber(admitted_ago) < LOST_SINCE then
    fresh = now + LOST_SINCE
  end
end
local lost_since = not lost and fresh > now and seen > 1 and seen <= base

-- What an instance leased and did not spend; a window it no longer finds has ended or was lost.
-- A lease numbered past the admissions counted here, or before they started again after a loss,
-- was lent by a state lost since: the windows opened again from the service's reports never
-- lent it.
for entry in string.gmatch(ARGV[8] or '', '%S+') do
  local units, first, periods = string.match(entry, '^(%d+)@(%d+)(.*)$')
  first = clamp(first, 0, MOST)
  if units and base < first and first <= seq then
    units = clamp(units, 0, MOST)
    for period in string.gmatch(periods, ':(%d+)') do
      for _, w in ipairs(windows) do
        if w.period == tonumber(period) then
          w.left = math.min(w.limit, w.left + units)
        end
      end
    end
  end
end

-- The service counted them, whichever of its periods they fell in: taken off every window open,
-- before the reports, which may count them already (a report only ever lowers a window), and
-- off those the reports open, unless the request whose answer opened the window was sent after
-- they were answered: then what it had left counts them.
local answered_here = {}
for age, requests in string.gmatch(ARGV[9] or '', '(%d+):(%d+)') do
  answered_here[#answered_here + 1] = { now - clamp(age, 0, YEAR), clamp(requests, 0, MOST) }
end
local function spend_sent_here(w)
  for _, answered in ipairs(answered_here) do
    if w.opened <= answered[1] then
      w.left = w.left - answered[2]
    end
  end
end
for _, w in ipairs(windows) do
  spend_sent_here(w)
end

local stale = false
for i = 10, #ARGV - 5, 6 do
  local limit = clamp(ARGV[i], 0, MOST)
  -- Never more left than the limit, as the headers are read.
  local left = math.min(clamp(ARGV[i + 1], 0, MOST), limit)
  local period, ends_in = clamp(ARGV[i + 2], 0, MOST), clamp(ARGV[i + 3], 0, YEAR)
  -- Admitted by a state lost since, it is not counted among the admissions here, and what it
  -- had left does not count the requests that state admitted after it: it opens no window.
  local admitted = clamp(ARGV[i + 4], 0, MOST)
  local sent = now - clamp(ARGV[i + 5], 0, YEAR)
  local lost_since = admitted > 0 and admitted <= base
  if lost_since then
    admitted, stale = 0, true
  end
  -- A period that was over when its answer arrived says nothing about the next, and one that
  -- ended here stays ended.
  if ends_in > 0 and period > gone then
    -- Every window whose period ended is resolved by a report of a period still on: the
    -- headers show the window that binds, so one not shown has at least this much left.
    resolved = true
    local found
    for _, w in ipairs(windows) do
      if w.period == period then
        found = w
      end
    end
    if found then
      -- Admitted before the opener, or by a state lost since, and counted after it: in
      -- neither what the opener had left nor the admissions after it.
      if (lost_since or (admitted > 0 and admitted < found.by)) and left < found.at then
        found.left = found.left - 1
      end
      -- Answers arrive out of order: the lowest report wins, never a higher one.
      found.limit = math.min(found.limit, limit)
      found.left = math.min(found.left, left)
      found.ends = math.max(found.ends, now + ends_in)
    elseif not stale then
      local by, at = 0, left
      if admitted > 0 and admitted <= seq then
        by = admitted
        left = left - (seq - admitted)
      end
      if #windows == MAX_WINDOWS then
        -- The window that ends first has the least to say about what is left.
        local first = 1
        for j, w in ipairs(windows) do
          if w.ends < windows[first].ends then
            first = j
          end
        end
        table.remove(windows, first)
      end
      local w = {
        period = period, limit = limit, left = left, ends = now + ends_in, leased = 0, by = by,
        at = at, opened = sent,
      }
      spend_sent_here(w)
      windows[#windows + 1] = w
    end
  end
end

local asked = ARGV[4]
if asked == 'ok' then
  -- A lost state's answer ends no probe of the state found out since.
  if not stale then
    half, probe = 0, 0
  end
elseif asked ~= '' then
  cool = math.max(cool, now + clamp(asked, 1, YEAR))
  half, probe = 1, 0
  -- Every instance hears of it at once, even from a Redis that evicts or loses the hash; a user
  -- the ACL does not let publish still has the rest.
  redis.pcall('PUBLISH', KEYS[1] .. ':quiet', string.format('%d', clamp(asked, 1, YEAR)))
end

local verdict = { 0, 0 }
if ARGV[1] == 'admit' then
  local metered = ARGV[2] == '1'
  local unknown = half == 1 or (metered and (not resolved or #windows == 0))
  local spent_until, spent = 0, nil
  if metered then
    for _, w in ipairs(windows) do
      if w.left <= 0 then
        if not spent or w.ends > spent.ends then
          spent = w
        end
        -- While leases of it are out, and for as long again after the last ends, what they do
        -- not spend may come back from their holders: asked again every fifth of that time.
        local ends, horizon = w.ends, clamp(ARGV[7], 0, YEAR)
        if now < w.leased + horizon then
          ends = math.min(ends, now + math.max(1, math.floor(horizon / 5)))
        end
        spent_until = math.max(spent_until, ends)
      end
    end
  end
  if cool > now then
    verdict = { 1, cool - now }
  elseif spent_until > 0 then
    verdict = { 3, spent_until - now, spent.limit, spent.ends - now, spent.period }
  elseif unknown and probe > now then
    verdict = { 2, probe - now }
  else
    local want, horizon = clamp(ARGV[6], 1, MOST), clamp(ARGV[7], 0, YEAR)
    local granted, lasts, last = 1, horizon, 0
    if not unknown and want > 1 and horizon > 0 then
      granted = want
      if metered then
        local least = MOST
        for _, w in ipairs(windows) do
          least = math.min(least, w.left)
          lasts = math.min(lasts, w.ends - now)
          last = math.max(last, w.ends - now)
        end
        -- Spread over the horizon: near a window's end, only what the time left needs.
        granted = math.ceil(want * lasts / horizon)
        granted = math.max(1, math.min(granted, math.floor(least / LEASE_SHARE)))
      end
    end
    local first = seq + 1
    seq = seq + granted
    verdict = { 0, lost_since and 3 or 0, first }
    if unknown then
      probe = now + clamp(ARGV[3], 0, YEAR)
      verdict = { 0, lost and 2 or (lost_since and 4 or 1), first }
    end
    if metered then
      for _, w in ipairs(windows) do
        w.left = w.left - granted
        if granted > 1 then
          w.leased = math.max(w.leased, now + lasts)
        end
      end
    end
    if want > 1 then
      verdict[4], verdict[5], verdict[6] = granted, lasts, last
      if metered then
        for _, w in ipairs(windows) do
          verdict[#verdict + 1] = w.period
        end
      end
    end
  end
end

-- Written whole: the hash holds a handful of fields.
redis.call('DEL', key)
local out = { 'seq', string.format('%d', seq) }
if base > 0 then
  out[#out + 1] = 'base'; out[#out + 1] = string.format('%d', base)
end
local last = now
if cool > now then
  out[#out + 1] = 'cool'; out[#out + 1] = string.format('%d', cool)
  last = math.max(last, cool)
end
if half == 1 then
  out[#out + 1] = 'half'; out[#out + 1] = '1'
end
if probe > now then
  out[#out + 1] = 'probe'; out[#out + 1] = string.format('%d', probe)
  last = math.max(last, probe)
end
if fresh > now then
  out[#out + 1] = 'fresh'; out[#out + 1] = string.format('%d', fresh)
end
if gone > 0 or not resolved then
  out[#out + 1] = 'gone'; out[#out + 1] = string.format('%d:%d', gone, resolved and 1 or 0)
end
for _, w in ipairs(windows) do
  out[#out + 1] = 'p:' .. string.format('%d', w.period)
  out[#out + 1] = string.format(
    '%d:%d:%d:%d:%d:%d:%d', w.limit, w.left, w.ends, w.leased, w.by, w.at, w.opened
  )
  last = math.max(last, w.ends)
end
if #out > 2 or seq > base then
  redis.call('HSET', key, unpack(out))
  -- Gone a minute after the last thing it knows has passed.
  redis.call('PEXPIRE', key, last - now + 60000)
end
return verdict
