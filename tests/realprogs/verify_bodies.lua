-- A wrk script that checks every response body byte for byte. Arguments after
-- "--": the document root, then the files to request in turn. The files'
-- sizes must differ: a body is compared with the file of its length.
-- At the end wrk prints "verified N mismatched M".
local threads = {}

function setup(thread)
  table.insert(threads, thread)
end

function init(args)
  paths, by_length = {}, {}
  for i = 2, #args do
    local file = assert(io.open(args[1] .. "/" .. args[i], "rb"))
    local body = file:read("*a")
    file:close()
    table.insert(paths, "/" .. args[i])
    by_length[#body] = body
  end
  sent, verified, mismatched = 0, 0, 0
end

function request()
  sent = sent + 1
  return wrk.format(nil, paths[(sent - 1) % #paths + 1])
end

function response(status, headers, body)
  verified = verified + 1
  if status ~= 200 or by_length[#body] ~= body then
    mismatched = mismatched + 1
  end
end

function done(summary, latency, requests)
  local verified, mismatched = 0, 0
  for _, thread in ipairs(threads) do
    verified = verified + thread:get("verified")
    mismatched = mismatched + thread:get("mismatched")
  end
  io.write(string.format("verified %d mismatched %d\n", verified, mismatched))
end
