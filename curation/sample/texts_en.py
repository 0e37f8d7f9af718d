"""English sentence banks, one per topic, written for this sample (nothing copied from elsewhere).

Slots: `{item}` is the page's subject and stays fixed within a page; other slots are drawn per
use; `{price}`, `{version}`, `{isbn}`, `{date}` and `{time}` are generated look-alikes (see
`values.py`).
"""

from __future__ import annotations

from curation.sample.bank import Bank

GENERIC = Bank.parse("generic", "en", """
[intros]
- I have been meaning to write this post for a while, and a few readers asked about it last
  month, so here it is.
- This post collects what we have learned over the past few years, including the mistakes.
- There is a lot of conflicting advice about this online, so I want to share what actually
  worked for us.
- Last {month} we finally found the time to look into this properly, and the results surprised
  us.
- A friend asked me about this over dinner recently, and my answer turned into this article.
- We get more questions about this than about almost anything else, so it deserves a proper
  write-up.
[closings]
- That is all for now; if you have questions, leave a comment below and I will do my best to
  answer them.
- We will keep experimenting and report back later in the year with an honest update.
- In short, start small, keep notes, and do not be discouraged by a bad first attempt.
- I hope this helps someone avoid the mistakes we made when we started.
- As always, your experience may differ, and that is part of what makes it interesting.
- Thanks for reading, and good luck with your own attempts.
[sentences]
- None of this is complicated, but it does reward a little patience and a willingness to learn
  from small failures.
- The best advice I ever received was to change one thing at a time, so that you can tell what
  actually made the difference.
- Cheap tools are fine to begin with, and you will soon learn which ones are worth upgrading.
- It is easy to spend a fortune before you know what you really need, so borrow or buy
  second-hand where you can.
- Most of the problems we ran into came from trying to do too much at once.
- Friends and neighbours turned out to be a better source of advice than any of the books we
  bought.
- Writing things down seemed tedious at the time, but those notes have saved us again and
  again.
- Do not be put off by people who make it look effortless; they made the same mistakes years
  ago.
- The second attempt was much easier than the first, mainly because we knew what to expect.
- If something feels wrong, stop and check rather than pressing on and hoping for the best.
[comments]
- Great post, thanks for sharing!
- This was really helpful, I will try it this weekend.
- Thanks, I had been wondering about exactly this.
- Bookmarked for later.
- Lovely write-up, as always.
[forum_open]
- Hi all, first post here after lurking for a few months.
- Quick question for the more experienced people here.
- Thanks, that is really helpful.
- I had exactly the same issue last year.
- Not sure if this is the right subforum, but here goes.
- Bumping this because I still have not found a solution.
- Good question, and one I asked myself when I started.
- Just to add my two cents to what has already been said.
[forum_close]
- Any advice would be appreciated.
- Hope that helps.
- Cheers.
- Thanks in advance!
- Let us know how you get on.
- Happy to answer questions if anything is unclear.
[slot:month]
- March
- April
- May
- June
- September
- October
""")

GARDENING = Bank.parse("gardening", "en", """
[forum_titles]
- Help: my {item} are not doing well this year
- Best way to grow {item} on a new plot?
- Advice on {item} for a complete beginner
- What are you growing this year? Mostly {item} here
[titles]
- How to grow {item} in a small garden
- Our {item} harvest this year, and what we would do differently
- A beginner's guide to growing {item} from seed
- Why your {item} are not thriving, and how to fix it
- Growing {item} in containers: notes from a season
- Ten lessons from a year of growing {item}
[headings]
- Choosing the right spot
- Preparing the soil
- Sowing and planting out
- Watering and feeding
- Dealing with pests
- Harvesting and storing
- What went wrong
- Final thoughts
[intros]
- Growing {item} was our main project in the garden this year, and it taught us a
  great deal.
- Readers keep asking how we grow our {item}, so here is everything we do, season by
  season.
[sentences]
- Most {item} want at least six hours of direct sun a day, so pick the brightest corner you have
  before you think about anything else.
- We dug two barrow-loads of garden compost into the bed in {month}, and the difference in the
  soil was obvious within a few weeks.
- If your soil is heavy clay, raise the bed by a hand's width and work in plenty of grit so the
  roots do not sit in cold water all winter.
- Sow thinly, because crowded seedlings compete for light and grow tall and weak before they ever
  reach the open ground.
- A cheap soil thermometer told us more than any seed packet did, since nothing really moved
  until the ground reached about ten degrees.
- Water deeply once or twice a week rather than a little every evening, which keeps the roots
  searching downwards instead of staying near the surface.
- During a dry spell in {month} we mulched around the plants with grass clippings, and the beds
  needed far less watering as a result.
- Slugs were the biggest problem for us, and a torch-lit patrol after rain did more good than any
  pellets or copper tape.
- Aphids tend to cluster on the soft new growth, and a firm jet of water from the hose usually
  knocks them back within a day or two.
- Companion planting is not magic, but a row of {companion} along the edge of the bed did seem to
  keep the worst of the pests away.
- A liquid feed made from comfrey leaves smells dreadful, yet it is free and our {item} responded
  to it within a week.
- Keep a simple notebook with sowing dates and varieties, because you will not remember next
  spring which one did well.
- We grew a variety from the local seed swap this year and found it reliable, although the
  flavour was milder than we had hoped.
- Harvest little and often, since many plants slow down once they have been allowed to set seed.
- Anything you cannot eat straight away can be blanched and frozen, or shared with neighbours who
  will often return the favour.
- The allotment committee reminded everyone to rotate crops so that soil-borne diseases do not
  build up in the same bed year after year.
- A cold frame made from two old windows gave our seedlings a head start of almost three weeks.
- Netting is worth the effort if pigeons visit your plot, because they can strip a row of young
  plants in a single morning.
- Try not to dig more than you need to, as the worms and fungi in an undisturbed bed do much of
  the hard work for you.
- Late frosts in {spring_month} caught us out twice, so we now keep a roll of fleece by the shed
  door.
- When the leaves turn yellow from the bottom up, the plant is usually short of nitrogen rather
  than water.
- We lost about a third of the crop to blight in a wet August, and we now choose resistant
  varieties wherever we can.
- Raised beds warm up faster in spring, but they also dry out quickly, so plan your watering
  before you build them.
- Our neighbour swears by seaweed meal, and after trying it on half the bed we have to admit she
  may be right.
- Support tall plants early with canes and soft twine, because tying in a plant that has already
  flopped always damages the stems.
- Pinching out the growing tips encourages bushier growth and usually a larger harvest later in
  the season.
- If you only have a balcony, a deep pot of at least thirty litres will still give you a
  respectable crop.
- Saving your own seed is easy with open-pollinated varieties, and over the years it gives you
  plants adapted to your own garden.
- The first {item} of the season never last long in our house, as the children usually eat them
  straight from the plant.
- Weeding for ten minutes every other day is far less painful than a whole afternoon of it once
  the bed has been neglected.
[slot:item]
- tomatoes
- courgettes
- runner beans
- strawberries
- sweet peppers
- potatoes
- raspberries
- carrots
- cucumbers
- leeks
- blueberries
- dwarf French beans
[slot:spring_month]
- April
- May
[slot:companion]
- marigolds
- nasturtiums
- chives
- calendula
- borage
[slot:month]
- March
- April
- May
- June
- July
- September
""")

HIKING = Bank.parse("hiking", "en", """
[titles]
- Walking the {item}: a two-day route report
- What I packed for a weekend on the {item}
- The {item} in {season}: conditions, timings and tips
- A first attempt at the {item}, and why we turned back
- Why the {item} is my favourite walk of the year
[headings]
- Getting there
- The route
- Kit and clothing
- Food and water
- Weather and safety
- Where to stay
- Would I do it again?
[intros]
- The {item} has been on my list for years, and this spring I finally walked it.
- I have walked the {item} in most seasons now, and it never disappoints.
[sentences]
- We left the car park just after seven, which gave us the path almost to ourselves for the first
  three hours.
- The first climb is steep but short, and the view back over the valley makes every stop for
  breath feel earned.
- Above the tree line the path becomes faint in places, so a map and compass are more than a
  formality here.
- We covered about {km} kilometres on the first day, with roughly {metres} metres of ascent spread
  over two long climbs.
- The forecast promised sunshine, but the cloud came down at lunchtime and did not lift again
  until late afternoon.
- Good boots matter on this route, because the descent is loose scree that shifts under your
  feet.
- I carried two litres of water and refilled from a stream, always through a filter, since sheep
  graze all over the hillside.
- There is a small stone shelter about halfway along, which is a welcome refuge if the wind picks
  up.
- Trekking poles saved my knees on the long descent, even though I used to think they were only
  for older walkers.
- Leave a route plan with someone at home and tell them when you expect to be back, because phone
  signal is patchy.
- The village pub at the end serves food until nine, and I cannot think of a better reward after a
  long day.
- We saw red deer on the far slope, a pair of buzzards and, to our surprise, a lizard sunning
  itself on a rock.
- Layers work better than one heavy jacket, as you warm up quickly on the climbs and cool down
  just as fast at the top.
- The stepping stones across the river can be under water after heavy rain, so check the levels
  before you set off.
- Our pace was slower than the guidebook suggested, mostly because we kept stopping to take
  photographs.
- If you only have one day, the shorter loop from the reservoir still takes in the best of the
  ridge.
- Buses to the start run only twice a day outside the summer season, which is worth knowing
  before you plan a linear walk.
- Bring more snacks than you think you need, because a day in the hills makes everyone hungrier
  than expected.
- The campsite by the lake was quiet and clean, although the midges in the evening were something
  else.
- Navigation in mist is a skill worth practising on easy ground before you need it on a narrow
  ridge.
- A lightweight emergency shelter weighs almost nothing and can make a cold wait for help far more
  bearable.
- We met a local farmer who told us the path had been rerouted after a landslip two winters ago.
- Blisters ended my last trip early, so this time I taped my heels before we even started
  walking.
- The last kilometre follows an old drovers' road lined with stone walls, and it is a gentle way
  to finish.
- Check the sunset time before you go, because it gets dark surprisingly early in the valleys.
- Keep dogs on a lead near livestock, particularly in the lambing season.
- The summit cairn is easy to miss in poor visibility, so take a bearing from the last stile.
- Overall the route is demanding but never technical, and fit walkers with some experience will
  enjoy it.
[slot:item]
- Ridgeway loop
- Harrow Pike circuit
- Blackwater valley trail
- Coldside horseshoe
- North Moor traverse
- Fenwick Edge path
- Three Tarns round
- Old Quarry ridge
[slot:season]
- spring
- early summer
- late autumn
- winter
[slot:km]
- 14
- 16
- 18
- 21
- 23
- 26
[slot:metres]
- 650
- 800
- 950
- 1,100
- 1,250
""")

COOKING = Bank.parse("cooking", "en", """
[titles]
- Easy {item} for busy weeknights
- My family's favourite {item}
- {item} in thirty minutes, with one pan
- The only {item} recipe you will ever need
- A lighter take on classic {item}
[headings]
- Why this recipe works
- Tips and variations
- Storing and reheating
- Serving suggestions
[intros]
- This {item} has been on our table more often than any other dish this winter.
- I started making this {item} when the children were small, and it has stayed a
  favourite.
[sentences]
- This is the dish I make when the fridge looks empty and everyone is hungry, because it relies
  mostly on store-cupboard staples.
- The secret is to cook the onions slowly, for a good ten minutes, until they are soft and sweet
  rather than browned.
- You can prepare everything the night before and simply reheat it, which makes it ideal for
  packed lunches.
- A squeeze of lemon at the very end lifts all the flavours and stops the sauce from tasting
  heavy.
- If you do not have fresh herbs, a teaspoon of dried ones added early in the cooking works almost
  as well.
- My children are fussy eaters, yet they always ask for second helpings when I make this.
- Use a wide pan so the liquid reduces quickly, as a deep saucepan will give you something closer
  to soup.
- Season in stages rather than all at once, tasting as you go, since salt is much easier to add
  than to take away.
- Leftovers keep well in the fridge for up to three days and freeze perfectly for a month.
- The recipe doubles easily, so I usually make a big batch on Sunday and freeze half of it in
  portions.
- Serve it with crusty bread, a bowl of rice or simply a green salad dressed with olive oil and
  vinegar.
- I tested this recipe five times before publishing it, and the version below is the one everyone
  agreed on.
- Swap the cream for natural yoghurt if you want something lighter, but stir it in off the heat so
  it does not split.
- Toasting the spices in a dry pan for a minute brings out their aroma and makes a noticeable
  difference.
- A splash of the starchy cooking water helps the sauce cling to the pasta instead of pooling at
  the bottom of the plate.
- Frozen vegetables are perfectly fine here and often more nutritious than tired fresh ones from
  the back of the fridge.
- Resting the dish for five minutes before serving lets the juices settle and makes it easier to
  portion.
- I buy the cheaper cuts from the butcher for slow-cooked dishes, as they become tender after a
  couple of hours.
- Children can help with most of the steps, from washing the vegetables to stirring the sauce.
- The total cost for four portions came to about {price} when I last made it.
- If the sauce looks too thick, loosen it with a little stock or water until it coats the back of
  a spoon.
- Taste before serving and adjust with salt, pepper or a pinch of sugar if the tomatoes are
  particularly sharp.
- My grandmother made a version of this every Friday, and the smell still reminds me of her
  kitchen.
- A heavy cast iron pan holds the heat well and gives a better crust than a thin non-stick one.
- Do not skip the browning step, because that caramelised layer is where most of the flavour
  comes from.
[steps]
- Heat the oil in a large pan over a medium heat and add the chopped onion with a pinch of salt.
- Cook gently for eight to ten minutes, stirring now and then, until the onion is soft and
  translucent.
- Add the garlic and spices and cook for another minute, until fragrant.
- Stir in the main ingredients and turn them in the oil so they are coated all over.
- Pour in the stock, bring to the boil, then reduce the heat and simmer for twenty minutes.
- Meanwhile, bring a large pan of salted water to the boil for the pasta or rice.
- Check the seasoning and add a squeeze of lemon juice.
- Scatter over the chopped herbs and serve straight away.
- Transfer to a baking dish and bake at 200 degrees for twenty-five minutes, until golden on top.
- Leave to rest for five minutes before cutting into portions.
[items]
- 2 tablespoons olive oil
- 1 large onion, finely chopped
- 3 cloves garlic, crushed
- 400 g tinned chopped tomatoes
- 500 ml vegetable stock
- 1 teaspoon ground cumin
- 1 teaspoon smoked paprika
- 200 g red lentils, rinsed
- a handful of fresh parsley
- 1 lemon, zest and juice
- salt and black pepper
- 150 g frozen peas
- 2 medium carrots, diced
- 300 g dried pasta
- 50 g grated hard cheese
- 1 tablespoon butter
- 2 sprigs of thyme
[slot:item]
- chicken and leek pie
- lentil and spinach curry
- lemon garlic pasta
- tomato and bean soup
- sausage and apple traybake
- mushroom risotto
- chickpea and sweet potato stew
- salmon with herb butter
- vegetable fried rice
- beef and ale stew
- pea and mint soup
- baked cod with chorizo
""")

DIY = Bank.parse("diy", "en", """
[titles]
- How to {item} without calling a tradesperson
- A step-by-step guide: how to {item}
- How to {item}: the mistakes I made so you do not have to
- Can you really {item} yourself? We tried it
[headings]
- Before you start
- Common problems
- Safety first
- How long does it take?
- When to call a professional
[intros]
- I put off having to {item} for months before deciding to tackle it myself.
- Knowing how to {item} saves money and a long wait for a tradesperson.
[sentences]
- Before you start, turn off the water at the stopcock and open a tap downstairs to drain the
  pipes.
- Most of the jobs in this guide need nothing more than a screwdriver, an adjustable spanner and a
  little patience.
- Lay an old towel in the bottom of the bath or sink so that small screws and washers cannot
  disappear down the plughole.
- Take a photograph of each stage as you dismantle things, because it makes putting them back
  together far easier.
- Buy the replacement part before you take anything apart, and bring the old one to the shop if
  you can.
- Use a detector to check for cables and pipes before you drill into any wall.
- The whole job took me just under an hour, including a trip to the hardware shop for the right
  size of washer.
- If the thread feels stiff, stop and check the alignment rather than forcing it, as stripped
  threads are hard to repair.
- Plasterboard needs special fixings, because ordinary plugs will pull out under any real weight.
- A spirit level is essential, since a shelf that is only slightly out of true will annoy you
  every time you look at it.
- Sand the surface lightly between coats of paint, and wipe away the dust with a damp cloth before
  continuing.
- Silicone sealant is easier to apply neatly if you run masking tape along both sides of the joint
  first.
- Old houses rarely have straight walls, so measure at several points and work from the average.
- Wear safety glasses whenever you cut, drill or chisel, however quick the job seems.
- The parts came to {price}, which is a fraction of the call-out charge a plumber quoted us.
- If water keeps dripping after you have replaced the washer, the valve seat itself may be worn
  and need regrinding.
- Let the filler dry completely before sanding, since it may look dry on the surface long before
  it has hardened underneath.
- A good quality brush costs more at first but leaves fewer marks and lasts for years if you clean
  it properly.
- Radiators at the top of the house usually collect the most air, so start bleeding them there.
- Keep a small box of spare screws, wall plugs and washers, because you will need them sooner than
  you think.
- Anything involving gas, or new electrical circuits, must be done by a registered professional,
  so do not be tempted.
- Check the pressure gauge on the boiler afterwards, as bleeding radiators can drop it below the
  recommended level.
- Work in good light, and a head torch leaves both hands free when you are under a sink or behind
  a cupboard.
- Ask a friend to hold long pieces steady while you mark and drill them, which saves both time and
  mistakes.
- When in doubt, switch off the power at the consumer unit and test the circuit before touching
  any wiring.
- A little washing-up liquid on a stiff screw often helps it turn without damaging the head.
[steps]
- Switch off the water or power supply and check that it really is off.
- Remove the cover or trim carefully with a flat screwdriver.
- Undo the retaining nut and lift out the old part.
- Clean the surfaces thoroughly and let them dry.
- Fit the new part, making sure it sits flat and square.
- Tighten the fixings firmly, but do not overtighten them.
- Restore the supply and check for leaks or movement.
- Tidy up, and keep the instructions somewhere you will find them again.
[items]
- adjustable spanner
- flat and cross-head screwdrivers
- replacement washers
- spirit level
- cordless drill
- masking tape
- silicone sealant and gun
- filler knife
- fine sandpaper
- old towels
- safety glasses
- tape measure
- wall plugs and screws
[slot:item]
- fix a dripping tap
- bleed a radiator
- replace a toilet seat
- patch a hole in plasterboard
- hang a heavy mirror
- reseal a bath
- fit a new door handle
- unblock a kitchen sink
- paint a panelled door
- put up floating shelves
- fix a squeaky floorboard
- replace a broken tile
""")

FINANCE = Bank.parse("finance", "en", """
[titles]
- How to {item} on an ordinary salary
- A simple plan to {item} this year
- What nobody tells you when you try to {item}
- Five habits that helped us {item}
[headings]
- Know where your money goes
- Set a realistic goal
- Automate the boring parts
- Cutting costs without misery
- What about investing?
- Staying on track
[intros]
- Trying to {item} can feel impossible at first, but small steps add up quickly.
- We decided last year to {item}, and this is how it went.
[sentences]
- The first step is simply to write down everything you spend for a month, including the small
  amounts that seem not to matter.
- Most people underestimate their regular subscriptions, and cancelling two or three of them can
  free up a surprising sum.
- An emergency fund of three months of essential spending is a sensible first target before you
  think about investing.
- Set up a standing order for the day after payday, so the money moves to savings before you have
  a chance to spend it.
- Paying off the debt with the highest interest rate first usually saves the most money over
  time.
- If you are more motivated by quick wins, clearing the smallest balances first can keep you
  going.
- We compared three supermarkets for a month and found that planning meals mattered far more than
  which shop we used.
- Index funds with low fees are a reasonable starting point for long-term savers who do not want
  to pick individual shares.
- Never invest money you might need within the next five years, because markets can fall sharply
  in the short term.
- Check whether your employer matches pension contributions, since that is effectively free money.
- A budget that leaves no room for small treats rarely survives the second month.
- We review our spending together on the first Sunday of every month, which takes about twenty
  minutes and a pot of tea.
- Switching energy supplier took less than a quarter of an hour and saved us around {price} a
  year.
- Keep your savings at a different bank, so the balance is not staring at you every time you
  check your card.
- Interest rates on easy-access accounts change often, so it is worth checking yours at least
  twice a year.
- Selling things you no longer use is a good way to start a savings goal, and it clears the house
  at the same time.
- Credit scores improve slowly, but paying every bill on time is the single most important habit.
- If you are struggling with debt, free advice services can help you draw up a plan and speak to
  lenders on your behalf.
- Inflation quietly erodes cash savings, which is one reason long-term money is usually better
  invested.
- Be wary of any scheme that promises high returns with no risk, because genuine investments never
  work like that.
- Buying second-hand furniture and appliances saved us a great deal when we moved into our first
  flat.
- A simple spreadsheet is enough for most households, and there is no need to pay for an
  expensive app.
- Celebrate milestones along the way, because saving is a long game and motivation fades.
- Talk openly about money with your partner, as different expectations are a common source of
  arguments.
[slot:item]
- build an emergency fund
- pay off a credit card
- save for a house deposit
- cut grocery spending
- start investing for retirement
- stick to a monthly budget
- lower energy bills
- plan for a career break
""")

TECH = Bank.parse("tech", "en", """
[forum_titles]
- Struggling to {item}, any pointers?
- Best way to {item} at home?
- Problems after trying to {item}
- Guide request: how do you {item}?
[titles]
- How to {item} on a fresh Linux server
- A practical walkthrough: how to {item}
- Troubleshooting: how to {item} after an upgrade
- How to {item} in ten minutes
[headings]
- Prerequisites
- Configuration
- Testing the setup
- Troubleshooting
- Next steps
[intros]
- I needed to {item} on a small server last month, and these are my notes.
- Every few months someone asks how to {item}, so here is the short version.
[sentences]
- This guide assumes a recent Debian or Ubuntu release and a user account with sudo rights.
- Always take a snapshot or a full backup before changing the configuration of a machine that
  other people depend on.
- The package in the distribution repositories is usually a little older, but it receives security
  fixes and is easier to maintain.
- After installing version {version}, check the service status and read the last few lines of the
  journal for warnings.
- Keep configuration files in a Git repository, so you can see exactly what changed when something
  stops working.
- Test the restore process at least once, because a backup you have never restored is only a hope.
- Disable password logins once your key-based access works, and keep a second session open while
  you test the change.
- The default settings are fine for a small home server, but busy machines need larger buffers and
  more worker processes.
- Log files grow quietly until the disk fills up, which is why rotation and compression should be
  set up from the first day.
- If the service refuses to start, the most common cause is a typo in the configuration file, so
  validate it first.
- Use a timer rather than a cron entry if you want the job's output to end up in the system
  journal.
- Firewall rules should allow only the ports you actually use and deny everything else by default.
- I upgraded from version {version} last week, and the only change I needed was a renamed option in
  the main config file.
- Write down every step as you go, and you will be grateful when the same machine needs
  rebuilding.
- Monitoring does not need to be complicated, and a small script that emails you when the disk is
  eighty percent full is a good start.
- Certificates expire, so automate the renewal and make sure something alerts you if it ever
  fails.
- Containers make it easy to try new software without cluttering the host, but they add their own
  layer to debug.
- On low-powered hardware, switch to a lighter database and turn off features you do not need.
- Check the time zone and clock synchronisation early, because log timestamps that disagree make
  troubleshooting miserable.
- Release notes often mention breaking changes in a single line, so read them carefully before
  upgrading.
- Permission problems are the second most common cause of failures, especially after copying files
  between machines.
- A staging machine that mirrors production, even a small one, catches most mistakes before users
  notice them.
- When asking for help on a forum, include the exact error message, your version numbers and what
  you already tried.
- Scripts should fail loudly and stop on the first error instead of carrying on with a
  half-finished job.
[steps]
- Update the package index and install the pending security updates.
- Install the package and enable the service so that it starts at boot.
- Copy the example configuration file and edit the values for your own setup.
- Validate the configuration and reload the service.
- Open the required port in the firewall and test the connection from another machine.
- Add a timer or scheduled job for the recurring tasks.
- Check the logs after the first run and fix any warnings.
- Document the change in your notes or repository.
[items]
- a server or virtual machine with at least 1 GB of RAM
- SSH access with sudo rights
- a domain name pointing to the server
- about thirty minutes
- a second machine for testing
- an external disk or storage bucket for backups
[code]
- sudo apt update && sudo apt upgrade -y
- sudo systemctl enable --now backup.timer
- journalctl -u nginx --since today
- sudo ufw allow 443/tcp && sudo ufw status
- df -h / && du -sh /var/log/*
- server { listen 443 ssl; server_name example.org; }
[slot:item]
- configure automatic backups
- set up a reverse proxy
- harden SSH access
- schedule jobs with systemd timers
- run a private Git server
- monitor disk usage
- rotate application logs
- set up a home media server
- enable HTTPS with free certificates
- migrate a database to a new host
""")

GADGETS = Bank.parse("gadgets", "en", """
[titles]
- {item} review: good enough for most people?
- The {item}, three months later
- Hands-on with the {item}
- Is the {item} worth the money?
[headings]
- Design and build
- Setting it up
- Everyday use
- Battery life
- Software and updates
[intros]
- I have been using the {item} every day for the past few weeks.
- The {item} has had a lot of attention, so I bought one to see what the fuss was
  about.
[sentences]
- The {item} arrived in a compact box with a short cable and a quick-start leaflet, but no
  charger.
- Build quality is better than the price suggests, with a matte finish that does not pick up
  fingerprints.
- Setting it up took about five minutes, although the companion app insisted on creating an
  account first.
- In daily use it simply gets on with the job, which is the highest praise I can give a device
  like this.
- Battery life comfortably exceeded the manufacturer's claim in our tests, lasting almost two full
  days of mixed use.
- The buttons are small and a little stiff, which makes them awkward to use while wearing gloves.
- Firmware version {version} fixed the connection drops we noticed in the first week.
- At {price}, it undercuts most of its rivals while offering nearly all of the same features.
- Sound is clear and balanced at normal volumes, but it becomes harsh when pushed to the maximum.
- The screen is bright enough to read outdoors, even on a sunny afternoon.
- Charging from empty to full took just under two hours with a standard wall adapter.
- I would like to see a longer warranty, as two years feels short for something you expect to keep
  for a while.
- The app is clean and easy to navigate, although a few settings are buried several menus deep.
- It is not the fastest model on the market, but for everyday tasks the difference is hard to
  notice.
- Privacy-conscious buyers will be pleased that it works without sending data to the cloud.
- After three months the finish still looks new, with only a faint scratch near the charging port.
- Customer support answered my question within a day and offered a replacement cable without any
  fuss.
- Compared with last year's model, the improvements are modest but welcome.
- The included case feels cheap, so budget for a better one if you plan to carry it around every
  day.
- If you already own the previous version, there is little reason to upgrade.
- Its biggest weakness is the sluggish software, which occasionally takes a few seconds to
  respond.
- For most people it strikes a sensible balance between price, performance and reliability.
[pros]
- Long battery life
- Solid build quality
- Competitive price
- Simple setup
- Works offline
- Bright, readable screen
[cons]
- No charger in the box
- Stiff buttons
- The app requires an account
- Short warranty
- Harsh sound at high volume
[slot:item]
- Aurora X2 wireless earbuds
- Fieldmate 5 rugged phone
- Lumio Desk Lamp Pro
- Brisk 300 robot vacuum
- Nimbus Air purifier
- Kestrel 14 laptop
- Pulse Run smartwatch
- Harbor mini speaker
- Quill e-reader
- Stride smart scale
""")

BOOKS = Bank.parse("books", "en", """
[titles]
- Book review: {item}
- Why {item} stayed with me long after the last page
- {item}: a slow start and a brilliant ending
- Reading group notes on {item}
[headings]
- What it is about
- The writing
- The characters
- What did not work
- Who should read it
[intros]
- I picked up {item} on a friend's recommendation and read it in a week.
- Our reading group chose {item} this month, and it divided the room.
[sentences]
- {item} follows a family over three generations, moving between a coastal village and a crowded
  city.
- The opening chapters are slow, but the patience pays off once the two storylines begin to meet.
- The author writes with a light touch, and even the saddest scenes are shot through with humour.
- I read the edition with ISBN {isbn}, which includes a short interview with the author at the
  back.
- Some readers will find the ending too neat, though I thought it was earned.
- Our reading group was split down the middle, which made for one of the liveliest discussions we
  have had.
- The secondary characters are drawn with as much care as the narrator, especially the elderly
  neighbour.
- There are a few too many flashbacks in the middle section, and I occasionally lost track of the
  timeline.
- It is the kind of novel that rewards a second reading, because small details early on take on
  new meaning later.
- The paperback costs {price}, and the library had several copies when I checked last week.
- The descriptions of the landscape are vivid without ever becoming overwritten.
- Dialogue is where the book really shines, with every character sounding distinct.
- I would recommend it to anyone who enjoyed quiet, character-driven fiction with a strong sense of
  place.
- The translation reads smoothly, and only a handful of idioms felt slightly awkward in English.
- It was first published in {year} and slowly became a word-of-mouth success.
- The central mystery is resolved about two thirds of the way through, and the rest of the book
  deals with its consequences.
- If you prefer fast-paced plots, this may feel too leisurely.
- I finished it in two evenings and immediately went looking for the author's earlier work.
- The themes of memory and belonging are handled with real care.
- A map at the front of the book would have helped, as the journey covers a lot of ground.
[pros]
- Memorable characters
- Beautiful descriptions of place
- Sharp, natural dialogue
- A satisfying ending
[cons]
- Slow opening chapters
- Too many flashbacks
- The timeline is hard to follow
[slot:item]
- The Salt Road Letters
- A Winter at Harrow House
- The Cartographer's Daughter
- Small Engines of Joy
- The Quiet Orchard
- Lanterns Over the Estuary
- The Last Ferry to Aldbury
- Notes from a Borrowed Kitchen
[slot:year]
- 2009
- 2013
- 2016
- 2019
- 2021
""")

NEWS = Bank.parse("news", "en", """
[titles]
- Council approves plans for {item}
- Residents divided over proposals for {item}
- Work begins on {item} after two-year delay
- Volunteers celebrate the opening of {item}
- Questions raised over the cost of {item}
[sentences]
- The plans were approved by seven votes to three at a packed meeting of the town council on
  {weekday} evening.
- {official} said the project would make the town centre safer and more pleasant for families.
- Several residents raised concerns about parking during the public consultation, which ran for
  six weeks.
- The work is expected to take around eight months and will be carried out in phases to limit
  disruption.
- A spokesperson for the council confirmed that the budget of {money} had been secured from a
  regional fund.
- Local business owners have given the scheme a cautious welcome, although some fear a drop in
  passing trade.
- Campaigners first proposed the idea more than five years ago and collected over two thousand
  signatures.
- Traffic will be diverted along Station Road while the main section of the road is closed.
- {official} told the Gazette that the council had listened to feedback and changed the design
  twice.
- The site was previously used as a car park and had stood largely empty since the factory closed.
- Volunteers planted more than three hundred trees over the weekend, helped by pupils from two
  local schools.
- Opposition councillors questioned whether the money might have been better spent on road
  repairs.
- A further public meeting will be held at the community centre next month, and all residents are
  welcome.
- The project has been shortlisted for a regional award for sustainable design.
- Figures released this week show that visitor numbers in the town centre have risen by twelve
  percent since last year.
- Police advised drivers to allow extra time for journeys while the temporary traffic lights are
  in place.
- The scheme forms part of a wider plan to reduce traffic and improve air quality in the town by
  the end of the decade.
- Residents can view the detailed drawings at the library or on the council's website.
- One shop owner on the High Street said she had not been told about the works until the barriers
  went up.
- The council says it will publish a progress report every three months until the work is
  complete.
- Funding for the second phase has not yet been confirmed, and a decision is expected in the
  autumn.
- Local historians welcomed the decision to keep the original stone archway as part of the new
  design.
[quotes]
- We have waited a long time for this, and I think most people will agree it was worth it.
- Nobody asked the people who actually live on this street what they wanted.
- It is a modest investment that will pay for itself many times over.
- We will keep a close eye on the costs and report back to residents regularly.
[slot:item]
- a new cycle lane on Mill Street
- the riverside park extension
- the library refurbishment
- a community solar farm
- the Old Market redevelopment
- a new primary school in Eastfield
- the weekend farmers' market
- a footbridge over the river Wend
[slot:official]
- Councillor Maria Delgado
- Councillor Tom Hartley
- Council leader Priya Nair
- Mayor James Whitcombe
- Project manager Helen Osei
[slot:money]
- £2.4 million
- £860,000
- £1.1 million
- £450,000
[slot:weekday]
- Monday
- Tuesday
- Wednesday
- Thursday
""")

SCIENCE = Bank.parse("science", "en", """
[titles]
- How {item} work: a plain-language explainer
- The science of {item}, explained
- Five things you probably did not know about {item}
- Why {item} still puzzle researchers
[headings]
- The basics
- How we know
- Open questions
- Further reading
[intros]
- Few natural phenomena are as fascinating as {item}, and the science behind them is
  surprisingly approachable.
- Readers often ask us about {item}, so this explainer covers the basics.
[sentences]
- Scientists have studied {item} for centuries, yet new instruments keep revealing details that
  earlier researchers could only guess at.
- To understand {item}, it helps to start with a few basic ideas about energy and how it moves
  from one place to another.
- Much of what we know comes from long-term measurements collected patiently by volunteers and
  research stations.
- Models are simplifications, and the best ones are judged by how well their predictions match
  careful observations.
- It is tempting to look for a single cause, but natural systems usually involve several processes
  acting together.
- Satellite data has transformed the field over the last forty years, giving a global view that
  was impossible before.
- Researchers are careful to separate what has been measured from what is still an informed guess.
- Citizen science projects let anyone contribute observations, and some have led to genuine
  discoveries.
- If you want to learn more, local museums and university open days are excellent places to
  start.
- Good science journalism explains uncertainty rather than hiding it, and that is what we try to
  do here.
[about:tides]
- Tides are caused mainly by the gravitational pull of the Moon, with a smaller contribution from
  the Sun.
- Most coastlines see two high tides and two low tides in a little over twenty-four hours.
- When the Sun and Moon line up at new and full moon, their effects combine to produce larger
  spring tides.
- The shape of the coastline and the depth of the sea floor can amplify the tidal range
  dramatically in some bays.
- Tide tables are predicted years in advance from the regular motions of the Earth, Moon and Sun.
[about:volcanoes]
- Volcanoes form where molten rock from deep inside the Earth finds a way to the surface.
- Many of them sit along the edges of tectonic plates, where the crust is either pulling apart or
  being pushed down.
- The style of an eruption depends largely on how much gas and silica the magma contains.
- Runny basalt lava tends to flow gently, while sticky, gas-rich magma can explode violently.
- Volcanic ash is made of tiny fragments of rock and glass, and it can damage aircraft engines far
  from the eruption.
[about:bird migrations]
- Many birds travel thousands of kilometres each year between their breeding grounds and their
  winter homes.
- They navigate using a combination of the Sun, the stars, the Earth's magnetic field and familiar
  landmarks.
- Before setting off, some species nearly double their body weight by storing fat as fuel for the
  journey.
- Ringing studies, in which small numbered bands are fitted to birds' legs, first revealed many
  migration routes.
- Tiny tracking devices now allow researchers to follow individual birds across entire continents.
[about:the northern lights]
- The northern lights appear when charged particles from the Sun collide with gases high in the
  Earth's atmosphere.
- Oxygen produces the familiar green glow, while nitrogen can add shades of blue and purple.
- The displays are most common in a broad ring around the magnetic poles, which is why northern
  Norway and Iceland are popular destinations.
- Strong solar storms can push the lights much further south than usual, surprising people who
  have never seen them.
- A dark sky away from city lights makes a far bigger difference than most visitors expect.
[about:coral reefs]
- Coral reefs are built by colonies of tiny animals that lay down skeletons of calcium carbonate.
- Most reef-building corals live in partnership with algae that supply them with food made by
  photosynthesis.
- When the water becomes too warm, corals expel their algae and turn white, a process known as
  bleaching.
- Reefs cover a tiny fraction of the ocean floor but support roughly a quarter of all known marine
  species.
- They also protect coastlines by breaking up waves before they reach the shore.
[about:thunderstorms]
- Lightning is a giant spark that forms when electric charge builds up inside a storm cloud.
- Collisions between ice crystals and soft hail help separate positive and negative charges within
  the cloud.
- A single bolt heats the surrounding air to several times the temperature of the surface of the
  Sun.
- Thunder is the sound of that air expanding suddenly, which is why it follows the flash.
- Counting the seconds between flash and thunder and dividing by three gives a rough distance in
  kilometres.
[slot:item]
- tides
- volcanoes
- bird migrations
- the northern lights
- coral reefs
- thunderstorms
""")

PETS = Bank.parse("pets", "en", """
[titles]
- What we learned in our first year with a {item}
- Keeping a {item} happy indoors
- Is a {item} the right pet for a busy family?
- Our {item}'s daily routine, and why it matters
[headings]
- Settling in
- Food and health
- Exercise and play
- Training
- The costs
- Final thoughts
[intros]
- We welcomed a {item} into our home last year, and life has not been the same since.
- Sharing a home with a {item} has taught us patience, among other things.
[sentences]
- The first few weeks were a period of adjustment for everyone, and we tried hard not to rush
  things.
- A quiet corner with a bed and a water bowl gave our {item} somewhere safe to retreat to when
  visitors came round.
- Our vet recommended a gradual change of food over ten days to avoid upsetting the stomach.
- Routine matters more than we expected, with meals, walks and bedtime at roughly the same time
  every day.
- Pet insurance felt expensive until the first unexpected bill, which it covered almost entirely.
- Short training sessions of five minutes, repeated a few times a day, worked far better than one
  long lesson.
- Rewarding good behaviour with a small treat or a favourite toy was much more effective than
  telling off.
- Regular grooming is a good chance to check for lumps, ticks or sore patches that might otherwise
  go unnoticed.
- Puzzle feeders and cardboard boxes kept boredom at bay on rainy days when we could not go out for
  long.
- We keep a small notebook with vaccination dates, weights and any changes in appetite.
- Older animals often need softer food and warmer sleeping spots, especially in winter.
- Introduce new people and places slowly, and let the animal set the pace.
- The children learned a great deal about responsibility, although the adults still do most of
  the cleaning.
- Our monthly costs, including food, insurance and bedding, come to about {price}.
- An annual check-up caught a dental problem early, which saved a more serious operation later.
- Never leave an animal in a car on a warm day, even with the windows open.
- Many rescue centres offer advice long after adoption, and ours answered every worried email we
  sent.
- If you work long hours, a dog walker or a pet sitter can make a huge difference.
- House plants can be toxic to pets, so we checked every plant in the house and moved a few out of
  reach.
- Microchipping is quick and inexpensive, and it gives you a much better chance of a reunion if
  your pet gets lost.
- We were surprised by how much personality our {item} showed once it felt at home.
- Trimming claws is easier if you start when the animal is calm, ideally after exercise or a meal.
[slot:item]
- rescue greyhound
- house rabbit
- senior cat
- border collie puppy
- pair of guinea pigs
- young Labrador
- shy rescue cat
""")

TRAVEL = Bank.parse("travel", "en", """
[titles]
- Three days in {item}: an unhurried itinerary
- {item} on a budget
- What to know before visiting {item}
- Slow travel in {item}: trains, markets and long lunches
[headings]
- Getting there
- Where to stay
- What to see
- Food and drink
- Getting around
- Practical tips
[intros]
- We spent a few unhurried days in {item} last autumn and have been meaning to write
  about it since.
- {item} had been on our list for years, and it did not disappoint.
[sentences]
- We arrived by train late in the evening, and the walk from the station to our guesthouse took
  about fifteen minutes.
- The old town is best explored on foot, early in the morning before the tour groups arrive.
- Our small apartment cost {price} a night and came with a balcony overlooking a quiet courtyard.
- A three-day transport pass paid for itself by the second afternoon.
- The covered market is worth a visit even if you do not plan to buy anything, just for the noise
  and colour.
- Most museums close on Mondays, which caught us out on our first trip.
- We ate our best meal in a tiny family restaurant with no menu, where the owner simply brought
  whatever was fresh that day.
- Learning a few words of the local language made a real difference, and people were patient with
  our attempts.
- Tap water is safe to drink, so bring a refillable bottle and save both money and plastic.
- The viewpoint at the top of the hill is free and, in my opinion, better than the paid tower in
  the centre.
- Book popular attractions a few days in advance during the summer, as tickets often sell out.
- We found that travelling in late September meant warm days, cooler evenings and far fewer
  crowds.
- Card payments are accepted almost everywhere, but small cafes sometimes prefer cash.
- A day trip by bus to the coast made a relaxing break from the city.
- Our hosts recommended a walking route along the river that we would never have found on our own.
- Pickpockets operate in the busiest squares, so keep your phone and wallet in a zipped pocket.
- The local pastries are worth every calorie, especially when they are still warm from the oven.
- If you have only one day, prioritise the historic centre and save the outer districts for
  another visit.
- Evening concerts in the churches are inexpensive and a lovely way to end the day.
- Comfortable shoes are essential, as many streets are steep and cobbled.
- We spent roughly {price} a day each on food, transport and entry tickets, not counting
  accommodation.
- The tourist information office gave us a free map and a list of events happening that week.
[slot:item]
- Lisbon
- Krakow
- the Scottish Highlands
- Porto
- Ljubljana
- the Dolomites
- Seville
- Tallinn
- Bruges
- Valencia
""")

TRIVIA = Bank.parse("trivia", "en", """
[titles]
- Quiz night recap: {item}
- Our favourite questions from {item}
- How we wrote the questions for {item}
[headings]
- The rounds
- Favourite questions
- Next time
[sentences]
- Twelve teams turned up this week, which is a record for a Tuesday evening.
- The picture round caused the most arguments, as it always does.
- We try to write questions that reward reasoning as well as memory, so a good guess is often
  enough.
- The winning team finished just one point ahead after a nail-biting final round.
- Thank you to everyone who brought food for the bake sale table, which raised a little over a
  hundred pounds for the hospice.
- A few teams challenged the answer to question nine, and after some checking we agreed they had a
  point.
- Our quizmaster has been running the night for eleven years and still writes every question by
  hand.
- Next month's theme is science and nature, so brush up on your planets and your periodic table.
- If you would like to join a team, come along early and we will happily find you a table.
- The music round was won by the youngest team in the room, much to the surprise of the regulars.
- Several people asked us to publish the questions afterwards, so here are a few of our
  favourites.
- We always include a couple of easy questions so that nobody goes home with zero points.
- Writing good questions is harder than it looks, because every answer has to be checked against
  more than one source.
- Entry is free, and the prize is a voucher for the bar and the honour of choosing next week's
  theme.
- The tie-break question asked for the year the pub was built, and the closest guess was only two
  years out.
[slot:item]
- the spring league final
- the charity quiz at the Red Lion
- a very close tie-break
- the summer science round
- the New Year special
- the school fundraiser quiz
""")

TOPICS: dict[str, Bank] = {
    bank.key: bank
    for bank in (
        GARDENING, HIKING, COOKING, DIY, FINANCE, TECH, GADGETS, BOOKS, NEWS, SCIENCE, PETS,
        TRAVEL, TRIVIA,
    )
}
