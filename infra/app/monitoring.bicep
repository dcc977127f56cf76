// Log Analytics + workspace-based Application Insights. Local (instrumentation-key) auth is
// off: only Entra-authenticated telemetry is accepted, so the app signs in with its identity
// (APPLICATIONINSIGHTS_AUTHENTICATION_STRING) and needs Monitoring Metrics Publisher. The
// workspace rejects shared-key (non-Entra) access too: features.disableLocalAuth, in the
// workspace API since 2020-10-01.
param logAnalyticsName string
param applicationInsightsName string
param location string
param tags object

resource logAnalytics 'Microsoft.OperationalInsights/workspaces@2023-09-01' = {
  name: logAnalyticsName
  location: location
  tags: tags
  properties: {
    sku: {
      name: 'PerGB2018'
    }
    retentionInDays: 30
    features: {
      disableLocalAuth: true
    }
  }
}

resource applicationInsights 'Microsoft.Insights/components@2020-02-02' = {
  name: applicationInsightsName
  location: location
  tags: tags
  kind: 'web'
  properties: {
    Application_Type: 'web'
    WorkspaceResourceId: logAnalytics.id
    DisableLocalAuth: true
  }
}

output applicationInsightsName string = applicationInsights.name
