from tiny_agent.cli import main

main()
